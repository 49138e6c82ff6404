"""Weak-scaling tables of data-parallel cases (gpt/R5_data_parallel): one table per configuration (the
case at one set of parameters), one row per rank count k, from one results file per k or one with several.

A case is a data-parallel one when it writes the cost model's counters (plugins/gpt/scaling_model.hpp):
predicted_floor_tokens_per_s (no overlap), linear_ceiling_tokens_per_s (k x one GPU) and, on paper, the
same rung on two nodes over a 400 Gb/s fabric (predicted_two_node_*)."""

from dataclasses import dataclass

from .document import Column, Heading, Paragraph, Table
from .units import format_number, format_si

FLOOR = "predicted_floor_tokens_per_s"
CEILING = "linear_ceiling_tokens_per_s"
EFFICIENCY = "scaling_efficiency"
TWO_NODE_FLOOR = "predicted_two_node_tokens_per_s"
TWO_NODE_CEILING = "predicted_two_node_ceiling_tokens_per_s"
_FAILED_GATES = ("fail", "error")

# Where a row's efficiency comes from: the k = 1 point of the same configuration in the report, or the
# case's own counter (its t_compute, one plain step on one GPU measured in setup, over its step time).
FROM_K1_POINT = "k=1 point"
FROM_CASE_COUNTER = "case"


@dataclass(frozen=True)
class ScalingPoint:
    benchmark: object
    ranks: int
    floor: float
    measured: float  # None when the gate failed or the run errored: such a figure is not a measurement
    ceiling: float
    efficiency: float
    efficiency_source: str
    two_node_floor: float
    two_node_ceiling: float


def _measured_rate(benchmark):
    if benchmark.gate in _FAILED_GATES or benchmark.errored:
        return None
    return benchmark.counter(benchmark.items_counter or "tokens/s")


def scaling_configurations(benchmarks):
    """{base name: [ScalingPoint, ...] by k} for the benchmarks of data-parallel cases, in first-seen order.
    Weak-scaling efficiency = measured / (k x the k=1 tokens/s) when the configuration has a passing k = 1
    point, else the case's scaling_efficiency counter."""
    groups = {}
    for benchmark in benchmarks:
        groups.setdefault(benchmark.base_name, []).append(benchmark)
    configurations = {}
    for base_name, members in groups.items():
        if not any(member.counter(FLOOR) is not None for member in members):
            continue
        members = sorted(members, key=lambda member: member.rank_count)
        single = next((rate for rate in (_measured_rate(m) for m in members if m.rank_count == 1) if rate), None)
        points = []
        for member in members:
            measured = _measured_rate(member)
            if single and measured is not None:
                efficiency, source = measured / (member.rank_count * single), FROM_K1_POINT
            else:
                efficiency = member.counter(EFFICIENCY) if measured is not None else None
                source = FROM_CASE_COUNTER if efficiency is not None else ""
            points.append(ScalingPoint(
                benchmark=member, ranks=member.rank_count, floor=member.counter(FLOOR), measured=measured,
                ceiling=member.counter(CEILING), efficiency=efficiency, efficiency_source=source,
                two_node_floor=member.counter(TWO_NODE_FLOOR), two_node_ceiling=member.counter(TWO_NODE_CEILING)))
        configurations[base_name] = points
    return configurations


def _efficiency_text(point):
    if point.efficiency is None:
        return "—"
    text = format_number(point.efficiency, 3)
    return text if point.efficiency_source == FROM_K1_POINT else f"{text} ({point.efficiency_source})"


def scaling_table(points, tag=""):
    with_two_nodes = any(p.two_node_floor is not None or p.two_node_ceiling is not None for p in points)
    columns = [Column("k", numeric=True), Column("GPUs"), Column("predicted floor tokens/s", numeric=True),
               Column("measured tokens/s", numeric=True), Column("linear ceiling tokens/s", numeric=True),
               Column("weak-scaling efficiency", numeric=True)]
    if with_two_nodes:
        columns += [Column("2 nodes (2k GPUs, on paper): floor tokens/s", numeric=True),
                    Column("2 nodes: ceiling tokens/s", numeric=True)]
    columns.append(Column("gate"))
    rows = []
    for point in points:
        gate = point.benchmark.gate
        row = [str(point.ranks), point.benchmark.device_label or "—", format_si(point.floor), format_si(point.measured),
               format_si(point.ceiling), _efficiency_text(point)]
        if with_two_nodes:
            row += [format_si(point.two_node_floor), format_si(point.two_node_ceiling)]
        row.append(gate.upper() if gate in _FAILED_GATES else (gate or "—"))
        rows.append(row)
    return Table(columns, rows, tag=tag)


def scaling_blocks(benchmarks, tag=""):
    """The headings, tables and the paragraph saying how to read them; [] when no data-parallel case ran."""
    configurations = scaling_configurations(benchmarks)
    if not configurations:
        return []
    blocks = []
    for points in configurations.values():
        blocks.append(Heading(4, f"Scaling: {points[0].benchmark.base_short_name}"))
        blocks.append(scaling_table(points, tag))
    two_nodes = any(p.two_node_floor is not None for points in configurations.values() for p in points)
    blocks.append(Paragraph(
        "Weak scaling (each rank trains its own batch). Predicted floor: no overlap of the all-reduce with the "
        "backward; linear ceiling: k x one GPU, the all-reduce fully hidden. Efficiency: measured / (k x the "
        "k=1 tokens/s) where a k=1 point is in the report, else, marked (case), the case's own "
        "scaling_efficiency (one plain step on one GPU, timed in its setup, over its step time)."
        + (" 2 nodes: the cost model's prediction for the same rung on two such nodes (2k ranks, one ring "
           "over a 400 Gb/s fabric), from the same run's step time and gradient bytes; never measured."
           if two_nodes else "")))
    return blocks
