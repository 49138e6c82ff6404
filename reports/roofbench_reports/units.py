"""Human-readable numbers: SI prefixes for rates and times, plain digits where prefixes would confuse."""

import math

_PREFIXES = {-15: "f", -12: "p", -9: "n", -6: "µ", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_LOWEST_EXPONENT = min(_PREFIXES)
_HIGHEST_EXPONENT = max(_PREFIXES)


def _trimmed(value, significant_digits):
    # 'g' would switch to exponent notation for 1000 <= value; 'f' with computed decimals never does.
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, significant_digits - 1 - magnitude)
    text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def format_si(value, unit="", significant_digits=3):
    """1.29e9 -> '1.29 G' (+ unit); 1e9 -> '1 G'; None -> '—'."""
    if value is None:
        return "—"
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}".rstrip()
    # Round first: 999.7 must become '1 k', not '1000'.
    rounded = float(f"{value:.{significant_digits - 1}e}")
    exponent = 3 * math.floor(math.log10(abs(rounded)) / 3)
    exponent = min(max(exponent, _LOWEST_EXPONENT), _HIGHEST_EXPONENT)
    scaled = rounded / 10.0**exponent
    return f"{_trimmed(scaled, significant_digits)} {_PREFIXES[exponent]}{unit}".rstrip()


def format_time(seconds):
    return format_si(seconds, "s")


def format_number(value, significant_digits=3):
    """Plain digits for everyday magnitudes (0.0833, 12.2, 4096), SI prefixes beyond."""
    if value is None:
        return "—"
    if value != 0 and (abs(value) >= 1e4 or abs(value) < 1e-3):
        return format_si(value, "", significant_digits)
    return _trimmed(value, significant_digits)


def format_percent(percent, significant_digits=3):
    """Takes a value already in percent (71.2 -> '71.2 %')."""
    if percent is None:
        return "—"
    return f"{format_number(percent, significant_digits)} %"


def format_signed_percent(percent):
    if percent is None:
        return "—"
    return f"{percent:+.1f} %"
