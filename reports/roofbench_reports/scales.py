"""Maps data values to pixels and chooses tick values: decades for log axes, 1-2-5 steps for linear."""

import math


class LogScale:
    """Base-10 log mapping of [lowest, highest] (whole decades) onto [pixel_start, pixel_end]."""

    def __init__(self, lowest_exponent, highest_exponent, pixel_start, pixel_end):
        if highest_exponent <= lowest_exponent:
            highest_exponent = lowest_exponent + 1
        self.lowest_exponent = lowest_exponent
        self.highest_exponent = highest_exponent
        self.pixel_start = pixel_start
        self.pixel_end = pixel_end

    @staticmethod
    def covering(values, pixel_start, pixel_end):
        """The smallest whole-decade range holding every positive value (1..10 when there is none)."""
        positive = [value for value in values if value is not None and value > 0]
        if not positive:
            return LogScale(0, 1, pixel_start, pixel_end)
        lowest = math.floor(math.log10(min(positive)) + 1e-9)
        highest = math.ceil(math.log10(max(positive)) - 1e-9)
        return LogScale(lowest, highest, pixel_start, pixel_end)

    @property
    def lowest(self):
        return 10.0**self.lowest_exponent

    @property
    def highest(self):
        return 10.0**self.highest_exponent

    def __call__(self, value):
        fraction = (math.log10(value) - self.lowest_exponent) / (self.highest_exponent - self.lowest_exponent)
        return self.pixel_start + fraction * (self.pixel_end - self.pixel_start)

    def contains(self, value):
        return value is not None and self.lowest * (1 - 1e-9) <= value <= self.highest * (1 + 1e-9)

    def decades(self):
        return [10.0**exponent for exponent in range(self.lowest_exponent, self.highest_exponent + 1)]

    def minor_ticks(self):
        """2x..9x of every decade: the unlabeled ticks that make a log axis readable."""
        return [
            multiple * 10.0**exponent
            for exponent in range(self.lowest_exponent, self.highest_exponent)
            for multiple in range(2, 10)
        ]


class LinearScale:
    def __init__(self, lowest, highest, pixel_start, pixel_end):
        self.lowest = lowest
        self.highest = highest if highest > lowest else lowest + 1
        self.pixel_start = pixel_start
        self.pixel_end = pixel_end

    def __call__(self, value):
        fraction = (value - self.lowest) / (self.highest - self.lowest)
        return self.pixel_start + fraction * (self.pixel_end - self.pixel_start)


def nice_step(span, target_ticks=5):
    """A 1, 2 or 5 times a power of ten step that cuts span into about target_ticks intervals."""
    if span <= 0:
        return 1.0
    rough = span / target_ticks
    power = 10.0 ** math.floor(math.log10(rough))
    for multiple in (1, 2, 5, 10):
        if multiple * power >= rough:
            return multiple * power
    return 10 * power


def nice_ticks_from_zero(highest, target_ticks=5):
    """Ticks 0, step, 2*step, ... up to the first one at or above highest."""
    step = nice_step(highest, target_ticks)
    count = max(1, math.ceil(highest / step - 1e-9))
    return [index * step for index in range(count + 1)]
