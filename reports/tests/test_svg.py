import unittest
import xml.etree.ElementTree as ElementTree

from roofbench_reports import svg

NS = {"svg": svg.SVG_NAMESPACE}


class SvgWriterTest(unittest.TestCase):
    def test_attribute_names_and_numbers(self):
        element = svg.line(0, 1.23456, 10, -0.001, stroke_width=2, class_="roof")
        self.assertEqual(element.to_xml(), '<line x1="0" y1="1.23" x2="10" y2="0" stroke-width="2" class="roof"/>')

    def test_text_and_attributes_are_escaped(self):
        element = svg.text(1, 2, 'a < b & "c"', fill="#000")
        parsed = ElementTree.fromstring(element.to_xml())
        self.assertEqual(parsed.text, 'a < b & "c"')
        quoted = svg.Element("g", data_name='say "hi" <now>')
        self.assertEqual(ElementTree.fromstring(quoted.to_xml()).get("data-name"), 'say "hi" <now>')

    def test_none_attributes_are_left_out(self):
        self.assertEqual(svg.Element("g", fill=None).to_xml(), "<g/>")

    def test_document_is_well_formed_svg(self):
        root = svg.figure(200, 100)
        root.add(svg.polyline([(0, 0), (10.5, 20)], stroke="red"))
        root.add(svg.circle(5, 5, 2)).add(svg.tooltip("point 1"))
        parsed = ElementTree.fromstring(svg.document_text(root).encode("utf-8"))
        self.assertEqual(parsed.tag, f"{{{svg.SVG_NAMESPACE}}}svg")
        self.assertEqual(parsed.get("viewBox"), "0 0 200 100")
        self.assertEqual(parsed.find("svg:polyline", NS).get("points"), "0,0 10.5,20")
        self.assertEqual(parsed.find("svg:circle/svg:title", NS).text, "point 1")

    def test_stacking_keeps_every_drawing(self):
        first, second = svg.figure(100, 50), svg.figure(300, 70)
        first.add(svg.circle(1, 1, 1))
        second.add(svg.circle(2, 2, 1))
        stacked = ElementTree.fromstring(svg.stack_vertically([first, second], gap=10).to_xml())
        self.assertEqual(stacked.get("width"), "300")
        self.assertEqual(stacked.get("height"), "130")
        nested = stacked.findall("svg:svg", NS)
        self.assertEqual([n.get("y") for n in nested], ["0", "60"])
        self.assertEqual(len(stacked.findall(".//svg:circle", NS)), 2)


if __name__ == "__main__":
    unittest.main()
