import contextlib
import copy
import importlib.util
import io
import subprocess
import sys
import unittest

from roofbench_reports import compare_cli
from roofbench_reports.compare import CANNOT_JUDGE, FASTER, NOT_COMPARABLE, SAME, SLOWER, format_ratio

from .helpers import (CPU_RUN, CPU_RUN_GATE_REGRESSION, GPU_RUN, IDENTICAL_RUNS, REPORTS_DIR, TemporaryFolder,
                      load_fixture)


def run_compare(*arguments):
    """(exit code, stdout, stderr) of roofbench-compare run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = compare_cli.main([str(argument) for argument in arguments])
    return code, out.getvalue(), err.getvalue()


def rows(markdown):
    """{benchmark: [cells]} of every table row in the comparison, folded rows included."""
    table = {}
    for line in markdown.splitlines():
        if line.startswith("| ") and not line.startswith("| benchmark |"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            table[cells[0]] = cells
    return table


def verdicts(markdown):
    return {name: cells[4] for name, cells in rows(markdown).items()}


def repetitions(document, keep):
    """The document with only its repetitions whose index is in `keep` (re-indexed from 0)."""
    result = copy.deepcopy(document)
    kept = []
    for entry in result["benchmarks"]:
        if entry.get("run_type") == "aggregate" or entry.get("repetition_index", 0) not in keep:
            continue
        kept.append(entry)
    result["benchmarks"] = kept
    return result


def slowed(document, factor):
    """Every time in the document multiplied by factor: the same runs of a binary that is that much slower."""
    result = copy.deepcopy(document)
    for entry in result["benchmarks"]:
        for key in ("real_time", "cpu_time", "time_median", "time_q1", "time_q3"):
            if isinstance(entry.get(key), (int, float)):
                entry[key] *= factor
        info = entry.get("roofbench", {})
        if info.get("samples_s"):
            info["samples_s"] = [value * factor for value in info["samples_s"]]
    return result


def with_counter(document, name, value, factor=1.0):
    """slowed(document, factor) with counter `name` set to value on every benchmark."""
    changed = slowed(document, factor)
    for entry in changed["benchmarks"]:
        entry[name] = value
    return changed


def compare_sides(base_files, new_files, *options):
    """roofbench-compare with the first file of each side as its positional argument, the rest as
    --base / --new."""
    arguments = [base_files[0], new_files[0]]
    for path in base_files[1:]:
        arguments += ["--base", path]
    for path in new_files[1:]:
        arguments += ["--new", path]
    return run_compare(*arguments, *options)


def interleaved(first, count):
    """count base and count new files of the recorded runs from index first on, as the recipe takes them:
    base, new, base, new, ..."""
    runs = IDENTICAL_RUNS[first:first + 2 * count]
    return runs[0::2], runs[1::2]


class IdenticalRunsTest(unittest.TestCase):
    """Twenty smoke runs (5 repetitions each, one process each) of one binary on one 2-core CI machine
    shared with other builds (fixtures/identical_runs, recorded by the roofbench of this tree), taken as
    the recipe takes them: base and new interleaved. No regression and no change may be called."""

    def test_interleaved_runs_of_one_binary_show_no_change(self):
        for first, count in ((0, 5), (10, 5), (0, 10), (4, 3)):
            base, new = interleaved(first, count)
            with self.subTest(first=first, count=count):
                code, out, _ = compare_sides(base, new)
                self.assertEqual(code, 0, out)
                self.assertIn("No regression", out)
                called = {name: v for name, v in verdicts(out).items() if v in (SLOWER.upper(), FASTER)}
                self.assertEqual(called, {}, out)
                self.assertIn(f"({count} runs)", out)

    def test_the_repetitions_of_one_process_are_one_run(self):
        # Five repetitions a side, yet one process each: nothing can be judged, and the exit code says so.
        for pair in range(10):
            with self.subTest(pair=pair):
                code, out, _ = run_compare(IDENTICAL_RUNS[2 * pair], IDENTICAL_RUNS[2 * pair + 1])
                self.assertEqual(code, compare_cli.EXIT_CANNOT_JUDGE, out)
                self.assertIn("**CANNOT JUDGE:", out)
                self.assertNotIn("No regression", out)
                self.assertNotIn("(5 runs)", out)
                self.assertEqual({v for v in verdicts(out).values()} - {CANNOT_JUDGE}, set(), out)


class ThirtyPercentSlowerTest(unittest.TestCase):
    """The new side is the second run of each pair with every time x1.3."""

    def compare(self, repetitions_kept, runs_per_side):
        folder = TemporaryFolder(self.addCleanup)
        base_files, new_files = [], []
        for run in range(runs_per_side):
            base_document = repetitions(load_fixture(IDENTICAL_RUNS[2 * run]), repetitions_kept)
            new_document = slowed(repetitions(load_fixture(IDENTICAL_RUNS[2 * run + 1]), repetitions_kept), 1.3)
            base_files.append(folder.write_json(f"base{run}.json", base_document))
            new_files.append(folder.write_json(f"new{run}.json", new_document))
        return compare_sides(base_files, new_files)

    def assert_quiet_benchmarks_are_slower(self, out):
        found = verdicts(out)
        # The matmuls are the settled ones on a busy 2-core machine (preempted, but never faster than
        # their medians); the others are "cannot judge" there.
        for name in ("cpu/matmul_naive/n:128", "cpu/matmul_blocked/n:128"):
            self.assertEqual(found[name], "SLOWER", out)
            self.assertRegex(rows(out)[name][3], r"^1\.(2[89]|3[012])x slower$")
        self.assertNotIn(FASTER, found.values())
        self.assertNotIn(SAME, found.values())  # 30% is never "unchanged": slower, or cannot judge

    def test_with_three_runs(self):
        code, out, _ = self.compare({0}, runs_per_side=3)
        self.assertEqual(code, 1, out)
        self.assertTrue(out.startswith("# roofbench comparison"))
        self.assertIn("**REGRESSION", out)
        self.assertIn("(3 runs)", out)
        self.assert_quiet_benchmarks_are_slower(out)

    def test_with_five_runs_of_five_repetitions(self):
        code, out, _ = self.compare({0, 1, 2, 3, 4}, runs_per_side=5)
        self.assertEqual(code, 1, out)
        self.assertIn("(5 runs)", out)
        self.assert_quiet_benchmarks_are_slower(out)

    def test_with_one_run_a_side_it_cannot_judge(self):
        code, out, _ = self.compare({0, 1, 2}, runs_per_side=1)
        self.assertEqual(code, compare_cli.EXIT_CANNOT_JUDGE, out)
        self.assertEqual(set(verdicts(out).values()), {CANNOT_JUDGE}, out)
        self.assertIn("1 vs 1 runs; 3+ each to judge", rows(out)["cpu/matmul_naive/n:128"][7])

    def test_unsettled_runs_are_never_judged(self):
        # Memory-bound runs that contention slowed for most of their samples: the median of one identical
        # run was 2.26x another's (pair 4, stream_triad), with tight repetitions inside each.
        _, out, _ = run_compare(IDENTICAL_RUNS[8], IDENTICAL_RUNS[9])
        self.assertEqual(verdicts(out)["cpu/stream_triad/n:4194304"], CANNOT_JUDGE)
        self.assertIn("2.2", rows(out)["cpu/stream_triad/n:4194304"][3])
        self.assertIn("unsettled: a run's fast samples are", rows(out)["cpu/stream_triad/n:4194304"][7])


class RunProblemsTest(unittest.TestCase):
    """Three interleaved runs a side, the new ones changed as each test says."""

    def setUp(self):
        self.folder = TemporaryFolder(self.addCleanup)
        self.base, new = interleaved(0, 3)
        self.documents = [load_fixture(path) for path in new]
        self.document = self.documents[0]

    def new_files(self, change=lambda document: document):
        return [self.folder.write_json(f"new{index}.json", change(document))
                for index, document in enumerate(self.documents)]

    def test_a_vanished_benchmark_fails_unless_allowed(self):
        for document in self.documents:
            document["benchmarks"] = [e for e in document["benchmarks"] if not e["name"].startswith("cpu/add/n:65536")]
        new = self.new_files()
        code, out, _ = compare_sides(self.base, new)
        self.assertEqual(code, 1, out)
        self.assertIn("### Removed (1)", out)
        self.assertIn("- cpu/add/n:65536", out)
        self.assertIn("--allow-removed to accept", out)
        code, out, _ = compare_sides(self.base, new, "--allow-removed")
        self.assertEqual(code, 0, out)

    def test_an_incomplete_run_fails_unless_allowed(self):
        self.document["context"]["roofbench"]["complete"] = False
        new = self.new_files()
        code, out, _ = compare_sides(self.base, new)
        self.assertEqual(code, 1, out)
        self.assertIn("is incomplete", out)
        code, _, _ = compare_sides(self.base, new, "--allow-incomplete")
        self.assertEqual(code, 0)

    def test_a_gate_regression_fails(self):
        code, out, _ = run_compare(CPU_RUN, CPU_RUN_GATE_REGRESSION)
        self.assertEqual(code, 1)
        self.assertIn("pass -> fail (REGRESSION)", out)
        self.assertIn("1 gate regression(s)", out)
        # The other way a gate is mended, and one run a side judges no time: nothing to pass on.
        code, _, _ = run_compare(CPU_RUN_GATE_REGRESSION, CPU_RUN)
        self.assertEqual(code, compare_cli.EXIT_CANNOT_JUDGE)

    def test_hot_against_cold_is_refused(self):
        for document in self.documents:
            document["context"]["roofbench"]["mode"] = "cold"
        new = self.new_files()
        code, out, err = compare_sides(self.base, new)
        self.assertEqual(code, 2)
        self.assertEqual(out, "")
        self.assertIn("different mode (hot vs cold)", err)
        code, _, _ = compare_sides(self.base, new, "--allow-mode-mismatch")
        self.assertEqual(code, 0)

    def test_different_facts_or_timing_are_flagged_per_row(self):
        for entry in self.document["benchmarks"]:
            if entry["name"].startswith("cpu/matmul_blas/"):
                entry["roofbench"]["facts"] = {"algorithm": "CUDNN_CONVOLUTION_FWD_ALGO_GEMM"}
            if entry["name"].startswith("cpu/add/n:65536"):
                entry["roofbench"]["timing"] = "graph"
        code, out, _ = compare_sides(self.base, self.new_files(lambda document: slowed(document, 3.0)))
        found = verdicts(out)
        self.assertEqual(found["cpu/matmul_blas/n:128"], NOT_COMPARABLE)
        self.assertIn("algorithm — vs CUDNN_CONVOLUTION_FWD_ALGO_GEMM", rows(out)["cpu/matmul_blas/n:128"][7])
        self.assertEqual(found["cpu/add/n:65536"], NOT_COMPARABLE)
        self.assertEqual(code, 1)  # the other rows are 3x slower

    def test_energy_on_both_sides_is_noted_per_row(self):
        def with_energy(joules, factor=1.0):
            return with_counter(self.document, "energy_per_run", joules, factor)

        _, out, _ = run_compare(self.base[0], self.folder.write_json("energy_base.json", with_energy(2.0)))
        self.assertNotIn("per run (×", out)  # only one side has it
        _, out, _ = run_compare(self.folder.write_json("energy_base.json", with_energy(2.0)),
                                self.folder.write_json("energy_new.json", with_energy(3.0, 3.0)))
        self.assertIn("energy 2 J -> 3 J per run (×1.50)", rows(out)["cpu/matmul_blas/n:128"][7])

    def test_mean_clocks_apart_on_both_sides_are_noted_per_row(self):
        def with_clock(mhz, factor=1.0):
            return with_counter(self.document, "sm_clock_mhz", mhz, factor)

        base = self.folder.write_json("clock_base.json", with_clock(1549.0))
        _, out, _ = run_compare(base, self.folder.write_json("clock_near.json", with_clock(1555.0)))
        self.assertNotIn("mean SM clock", out)  # within 1%: not worth a note
        _, out, _ = run_compare(base, self.folder.write_json("clock_far.json", with_clock(1597.0, 0.98)))
        self.assertIn("mean SM clock 1549 -> 1597 MHz (+3.1%): the time follows it at a power limit",
                      rows(out)["cpu/matmul_blas/n:128"][7])

    def test_a_fact_of_many_parts_shows_only_the_parts_that_differ(self):
        shapes = [f"m {m} n 65536 k 512 TN bf16->bf16: algo 66, tile 29" for m in (512, 1536, 2048)]
        changed = shapes[:1] + ["m 1536 n 65536 k 512 TN bf16->bf16: algo 66, tile 20"] + shapes[2:]
        for document, parts in ((self.document, shapes), (copy.deepcopy(self.document), changed)):
            for entry in document["benchmarks"]:
                if entry["name"].startswith("cpu/matmul_blas/"):
                    entry["roofbench"]["facts"] = {"matmul_algorithms": "; ".join(parts)}
            if parts is shapes:
                base = self.folder.write_json("parts_base.json", document)
            else:
                new = self.folder.write_json("parts_new.json", document)
        _, out, _ = run_compare(base, new)
        note = rows(out)["cpu/matmul_blas/n:128"][7]
        self.assertEqual(verdicts(out)["cpu/matmul_blas/n:128"], NOT_COMPARABLE)
        self.assertIn("matmul_algorithms m 1536 n 65536 k 512 TN bf16->bf16: algo 66, tile 29 vs "
                      "m 1536 n 65536 k 512 TN bf16->bf16: algo 66, tile 20", note)
        self.assertNotIn("m 512 ", note)
        # Told to ignore the fact, the row is judged on its timings (one run a side: it cannot be), the note kept.
        code, out, _ = run_compare(base, new, "--ignore-fact", "matmul_algorithms")
        self.assertEqual(code, compare_cli.EXIT_CANNOT_JUDGE)
        self.assertNotEqual(verdicts(out)["cpu/matmul_blas/n:128"], NOT_COMPARABLE)
        self.assertIn("differs, ignored: matmul_algorithms m 1536", rows(out)["cpu/matmul_blas/n:128"][7])

    def test_a_noisy_result_is_judged_on_runs_and_noted_never_on_a_single_run(self):
        for document in self.documents:
            for entry in document["benchmarks"]:
                if entry["name"].startswith("cpu/matmul_naive/"):
                    entry["roofbench"]["quality"] = "noisy"
        _, out, _ = compare_sides(self.base, self.new_files(lambda document: slowed(document, 1.3)))
        self.assertEqual(verdicts(out)["cpu/matmul_naive/n:128"], "SLOWER")
        self.assertIn("noisy in new: judged on its run medians", rows(out)["cpu/matmul_naive/n:128"][7])
        new = self.folder.write_json("noisy1.json", slowed(self.document, 3.0))
        _, out, _ = run_compare(self.base[0], new)
        self.assertEqual(verdicts(out)["cpu/matmul_naive/n:128"], CANNOT_JUDGE)
        self.assertIn("noisy in new, 1 vs 1 runs", rows(out)["cpu/matmul_naive/n:128"][7])


class PresentationTest(unittest.TestCase):
    def test_ratios_read_as_factors(self):
        self.assertEqual(format_ratio(1.31), "1.31x slower")
        self.assertEqual(format_ratio(1 / 5850), "5850x faster")
        self.assertEqual(format_ratio(1 / 12.34), "12.3x faster")
        self.assertEqual(format_ratio(1.001), "1.00x")
        self.assertEqual(format_ratio(None), "—")

    def test_each_side_shows_its_noise_and_runs(self):
        _, out, _ = compare_sides(*interleaved(0, 5))
        cells = rows(out)["cpu/matmul_naive/n:128"]
        self.assertRegex(cells[1], r"^[0-9.]+ ms ±[0-9.]+% run to run \(5 runs\)$")
        self.assertRegex(cells[2], r"^[0-9.]+ ms ±[0-9.]+% run to run \(5 runs\)$")

    def test_unchanged_rows_are_folded(self):
        _, out, _ = compare_sides(*interleaved(0, 10))
        self.assertIn("<details><summary>", out)
        folded = out[out.index("<details>"):out.index("</details>")]
        self.assertIn("unchanged", folded)
        before = out[:out.index("<details>")]
        self.assertNotIn("| unchanged |", before)

    def test_runs_are_named_by_date_host_and_commit(self):
        folder = TemporaryFolder(self.addCleanup)
        document = load_fixture(IDENTICAL_RUNS[1])
        document["context"]["roofbench"]["commit"] = "0123456789abcdef0123"
        new = folder.write_json("latest.json", document)
        _, out, _ = run_compare(IDENTICAL_RUNS[0], new)
        date = load_fixture(IDENTICAL_RUNS[1])["context"]["date"]
        self.assertIn(f"New: {date[:10]} {date[11:16]}", out)
        self.assertIn("commit 0123456789ab", out)
        self.assertIn(f"on {document['context']['host_name']}", out)

    def test_an_obvious_change_is_called_even_from_single_runs(self):
        folder = TemporaryFolder(self.addCleanup)
        base = folder.write_json("base.json", repetitions(load_fixture(IDENTICAL_RUNS[0]), {0}))
        new = folder.write_json("new.json", slowed(repetitions(load_fixture(IDENTICAL_RUNS[1]), {0}), 1 / 5850))
        code, out, _ = run_compare(base, new)
        self.assertEqual(code, 0, out)
        self.assertRegex(rows(out)["cpu/matmul_naive/n:128"][3], r"^58[0-9]{2}x faster$")
        self.assertEqual(verdicts(out)["cpu/matmul_naive/n:128"], FASTER)


class InputsTest(unittest.TestCase):
    def test_bad_inputs_exit_2_with_one_line(self):
        folder = TemporaryFolder(self.addCleanup)
        google_only = folder.write_json("google.json", {"context": {}, "benchmarks": []})
        (folder.path / "text.json").write_text("hello", encoding="utf-8")
        cases = {
            "missing": (folder.path / "missing.json", "no such file"),
            "not JSON": (folder.path / "text.json", "not JSON"),
            "not roofbench": (google_only, "not a roofbench results file"),
            "other device": (GPU_RUN, "different devices"),
        }
        for label, (new, message) in cases.items():
            with self.subTest(label):
                code, out, err = run_compare(CPU_RUN, new)
                self.assertEqual(code, 2)
                self.assertEqual(out, "")
                self.assertIn(message, err)
                self.assertEqual(err.count("\n"), 1)

    def test_device_mismatch_can_be_allowed(self):
        code, out, _ = run_compare(CPU_RUN, GPU_RUN, "--allow-device-mismatch", "--allow-removed")
        self.assertEqual(code, compare_cli.EXIT_CANNOT_JUDGE, out)  # no benchmark on both sides
        self.assertIn("### Added (8)", out)
        self.assertIn("### Removed (12)", out)

    def test_the_installed_script_runs(self):
        base, new = interleaved(0, 3)
        arguments = [str(base[0]), str(new[0]), "--base", str(base[1]), "--base", str(base[2]),
                     "--new", str(new[1]), "--new", str(new[2])]
        completed = subprocess.run([sys.executable, str(REPORTS_DIR / "roofbench-compare")] + arguments,
                                   capture_output=True, text=True, timeout=60)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        self.assertTrue(completed.stdout.startswith("# roofbench comparison"))

    def test_help_ends_in_whole_sentences_and_lists_the_exit_codes(self):
        completed = subprocess.run([sys.executable, str(REPORTS_DIR / "roofbench-compare"), "--help"],
                                   capture_output=True, text=True, timeout=60)
        self.assertEqual(completed.returncode, 0)
        description = completed.stdout.split("positional arguments:")[0]
        self.assertIn("3  cannot judge", description)
        self.assertTrue(description.rstrip().endswith(")"), description)

    def test_the_recipe_check_reads_the_headline(self):
        spec = importlib.util.spec_from_file_location("compare_recipe_check",
                                                      REPORTS_DIR.parent / "scripts" / "compare_recipe_check.py")
        script = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(script)
        for base, new in (interleaved(0, 3), interleaved(0, 1)):
            _, out, _ = compare_sides(base, new)
            match = script.HEADLINE.search(out)
            self.assertIsNotNone(match, out)
            self.assertEqual(sum(map(int, match.groups()[1:])), len(verdicts(out)))

    def test_missing_zero_or_negative_times_are_refused(self):
        folder = TemporaryFolder(self.addCleanup)
        changes = {
            "zero": lambda entry: entry.update(real_time=0, time_median=0),
            "negative": lambda entry: entry.update(real_time=-3.0, time_median=-3e-6),
            "missing": lambda entry: [entry.pop(key, None) for key in ("real_time", "time_median")],
        }
        for label, change in changes.items():
            document = load_fixture(IDENTICAL_RUNS[1])
            change(document["benchmarks"][2])
            bad = folder.write_json(f"{label}.json", document)
            name = document["benchmarks"][2]["name"]
            for arguments in ((IDENTICAL_RUNS[0], bad), (bad, IDENTICAL_RUNS[0])):
                with self.subTest(label, side="new" if arguments[1] == bad else "base"):
                    code, out, err = run_compare(*arguments)
                    self.assertEqual(code, 2, out)
                    self.assertEqual(out, "")
                    self.assertEqual(err.count("\n"), 1, err)
                    self.assertIn(str(bad), err)
                    self.assertIn(name, err)

    def test_no_traceback_on_odd_input(self):
        folder = TemporaryFolder(self.addCleanup)
        nameless = load_fixture(IDENTICAL_RUNS[1])
        del nameless["benchmarks"][0]["name"]
        (folder.path / "empty.json").write_text("", encoding="utf-8")
        inputs = {
            "empty file": folder.path / "empty.json",
            "a list": folder.write_json("list.json", [1, 2]),
            "no name": folder.write_json("nameless.json", nameless),
            "a folder": folder.path,
        }
        for label, path in inputs.items():
            with self.subTest(label):
                completed = subprocess.run([sys.executable, str(REPORTS_DIR / "roofbench-compare"),
                                            str(IDENTICAL_RUNS[0]), str(path)],
                                           capture_output=True, text=True, timeout=60)
                self.assertEqual(completed.returncode, 2, completed.stderr)
                self.assertNotIn("Traceback", completed.stderr)
                self.assertEqual(completed.stderr.count("\n"), 1, completed.stderr)


if __name__ == "__main__":
    unittest.main()
