"""A minimal SVG writer: elements with attributes, text and children, serialised as escaped XML.

Keyword attributes use Python spelling: stroke_width= becomes stroke-width, class_= becomes class.
"""

from xml.sax.saxutils import escape, quoteattr

SVG_NAMESPACE = "http://www.w3.org/2000/svg"
FONT_FAMILY = "DejaVu Sans, Helvetica, Arial, sans-serif"


def _attribute_name(name):
    return name.rstrip("_").replace("_", "-")


def _attribute_value(value):
    if isinstance(value, float):
        # Two decimals are far below a pixel; shorter numbers keep the files small and diffable.
        text = f"{value:.2f}".rstrip("0").rstrip(".")
        return "0" if text == "-0" else text
    return str(value)


class Element:
    def __init__(self, tag, text=None, **attributes):
        self.tag = tag
        self.text = text
        self.attributes = {_attribute_name(k): _attribute_value(v) for k, v in attributes.items() if v is not None}
        self.children = []

    def add(self, child):
        """Appends a child and returns it, so that a group can be built and filled in one go."""
        self.children.append(child)
        return child

    def to_xml(self):
        attributes = "".join(f" {name}={quoteattr(value)}" for name, value in self.attributes.items())
        if self.text is None and not self.children:
            return f"<{self.tag}{attributes}/>"
        inner = escape(self.text) if self.text is not None else ""
        inner += "".join(child.to_xml() for child in self.children)
        return f"<{self.tag}{attributes}>{inner}</{self.tag}>"


def figure(width, height):
    """The root of one standalone drawing, white background included (dark-mode viewers stay readable)."""
    width, height = float(width), float(height)
    root = Element("svg", xmlns=SVG_NAMESPACE, width=width, height=height,
                   viewBox=f"0 0 {_attribute_value(width)} {_attribute_value(height)}",
                   font_family=FONT_FAMILY, font_size=12)
    root.add(rect(0, 0, width, height, fill="white"))
    return root


def stack_vertically(figures, gap=16):
    """One drawing holding several, one under the other (e.g. one roofline per device)."""
    width = max(float(f.attributes["width"]) for f in figures)
    height = sum(float(f.attributes["height"]) for f in figures) + gap * (len(figures) - 1)
    root = figure(width, height)
    top = 0.0
    for child in figures:
        nested = Element("svg", x=0.0, y=top, width=child.attributes["width"], height=child.attributes["height"],
                         viewBox=child.attributes["viewBox"])
        nested.children = child.children
        root.add(nested)
        top += float(child.attributes["height"]) + gap
    return root


def document_text(root):
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + root.to_xml() + "\n"


def group(**attributes):
    return Element("g", **attributes)


def line(x1, y1, x2, y2, **style):
    return Element("line", x1=float(x1), y1=float(y1), x2=float(x2), y2=float(y2), **style)


def polyline(points, **style):
    coordinates = " ".join(f"{_attribute_value(float(x))},{_attribute_value(float(y))}" for x, y in points)
    return Element("polyline", points=coordinates, fill="none", **style)


def rect(x, y, width, height, **style):
    return Element("rect", x=float(x), y=float(y), width=float(width), height=float(height), **style)


def circle(cx, cy, r, **style):
    return Element("circle", cx=float(cx), cy=float(cy), r=float(r), **style)


def text(x, y, content, **style):
    return Element("text", content, x=float(x), y=float(y), **style)


def tooltip(content):
    """A <title> child: browsers show it on hover, so dense plots can carry full details."""
    return Element("title", content)
