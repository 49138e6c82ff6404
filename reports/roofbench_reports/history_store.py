"""The history store: every recorded run's context and every benchmark's summary, in SQLite (a file, no
server) or PostgreSQL (a postgresql:// URL, for runners on many machines), with one schema for both.

Each results file is added in one transaction, keyed by a fingerprint of its content, so a file added
twice is recorded once and two processes adding at once lose nothing: SQLite serialises the writers
(BEGIN IMMEDIATE, a busy timeout), PostgreSQL's unique key decides which of two equal inserts wins.
"""

import hashlib
import json
import os
import sqlite3
from dataclasses import dataclass

from .results import ResultsError, finite_number

POSTGRESQL_SCHEMES = ("postgresql://", "postgres://")
# How long an SQLite writer waits for another one to finish before giving up: adding a 200-benchmark
# run takes milliseconds, so this only runs out when a process holds the lock and hangs.
_SQLITE_BUSY_TIMEOUT_S = 60
# Any constant: the key of the PostgreSQL advisory lock that serialises creating the schema.
_SCHEMA_LOCK_KEY = 7_061_524

_RUN_COLUMNS = ("fingerprint", "source", "date", "commit_id", "host", "device_key", "device_name",
                "device_kind", "driver", "suite", "mode", "gate_mode", "version", "complete", "ceilings",
                "added_at")
_RESULT_COLUMNS = ("run_id", "benchmark", "median_s", "q1_s", "q3_s", "noise", "run_count", "gate",
                   "counters")

# {id} is the one column whose spelling differs between the two databases.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS roofbench_runs (
  id {id},
  fingerprint TEXT NOT NULL UNIQUE,
  source TEXT NOT NULL, date TEXT NOT NULL, commit_id TEXT NOT NULL, host TEXT NOT NULL,
  device_key TEXT NOT NULL, device_name TEXT NOT NULL, device_kind TEXT NOT NULL, driver TEXT NOT NULL,
  suite TEXT NOT NULL, mode TEXT NOT NULL, gate_mode TEXT NOT NULL, version TEXT NOT NULL,
  complete INTEGER NOT NULL, ceilings TEXT NOT NULL, added_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS roofbench_results (
  run_id BIGINT NOT NULL REFERENCES roofbench_runs (id) ON DELETE CASCADE,
  benchmark TEXT NOT NULL,
  median_s DOUBLE PRECISION, q1_s DOUBLE PRECISION, q3_s DOUBLE PRECISION, noise DOUBLE PRECISION,
  run_count INTEGER NOT NULL, gate TEXT NOT NULL, counters TEXT NOT NULL,
  PRIMARY KEY (run_id, benchmark)
);
CREATE INDEX IF NOT EXISTS roofbench_runs_order ON roofbench_runs (date, id)
"""
_SQLITE_ID = "INTEGER PRIMARY KEY AUTOINCREMENT"
_POSTGRESQL_ID = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"

# The counters kept per benchmark besides its times: the rates and figures a dashboard plots.
HEADLINE_COUNTERS = ("FLOP/s", "B/s", "AI", "roof_pct", "energy_per_run", "power", "sm_clock_mhz")
_SUMMARY_FIELDS = ("time_q1", "time_q3", "noise")


class StoreError(Exception):
    """The store cannot be opened or read; the message is one line for the user."""


@dataclass(frozen=True)
class RunRecord:
    id: int
    source: str
    date: str
    commit: str
    host: str
    device_key: str
    device_name: str
    device_kind: str
    driver: str
    suite: str
    mode: str
    gate_mode: str
    version: str
    complete: bool
    ceilings: dict

    @property
    def label(self):
        """How a chart's axis names the run: its commit when known, else its date."""
        return self.commit[:10] if self.commit else self.date.replace("T", " ")[:19]


@dataclass(frozen=True)
class ResultRecord:
    run_id: int
    benchmark: str
    median_s: float  # None when the benchmark was not timed (an error, a failed gate before timing)
    q1_s: float
    q3_s: float
    noise: float
    run_count: int
    gate: str
    counters_json: str  # read when asked: a trend over 200,000 results never needs them

    @property
    def counters(self):
        return json.loads(self.counters_json)


def file_fingerprint(path):
    """The same results file, added twice or copied (latest.json), gives the same fingerprint: the host
    writes a file once per benchmark with a new date, so equal bytes are the same run."""
    try:
        with open(path, "rb") as stream:
            return hashlib.sha256(stream.read()).hexdigest()
    except OSError as error:
        raise ResultsError(f"{path}: cannot read: {error.strerror}") from None


def _ceilings_json(ceilings):
    return json.dumps({"bandwidth_Bps": ceilings.bandwidth_Bps, "read_bandwidth_Bps": ceilings.read_bandwidth_Bps,
                       "flops": ceilings.flops, "datasheet_name": ceilings.datasheet_name}, sort_keys=True)


def run_row(run, fingerprint, added_at):
    return (fingerprint, run.path, run.date, run.commit, run.host_name, run.device.key, run.device.name,
            run.device.kind, run.driver, run.suite, run.mode, run.gate_mode, run.version, int(run.complete),
            _ceilings_json(run.ceilings), added_at)


def _counter_medians(benchmark, names):
    """Benchmark.counter of each name present in its runs: the median over the runs. A single run's median
    is its own value, read directly: a large history adds 200,000 of them."""
    entries = benchmark.entries
    if len(entries) == 1:
        return {name: finite_number(entries[0][name]) for name in names if name in entries[0]}
    present = set().union(*entries)
    return {name: benchmark.counter(name) for name in names if name in present}


def result_rows(benchmarks):
    """(benchmark, median, q1, q3, noise, run count, gate, counters JSON) per benchmark of one run."""
    rows = []
    for benchmark in benchmarks:
        median = benchmark.median_seconds
        items_counter = benchmark.items_counter  # a property that reads every entry's summaries: once
        items = (items_counter,) if items_counter else ()
        values = _counter_medians(benchmark, _SUMMARY_FIELDS + HEADLINE_COUNTERS + items)
        timed = median is not None
        counters = {name: values[name] for name in HEADLINE_COUNTERS + items if values.get(name) is not None}
        rows.append((benchmark.name, median, values.get("time_q1") if timed else None,
                     values.get("time_q3") if timed else None, values.get("noise"), benchmark.repetitions,
                     benchmark.gate or "", json.dumps(counters, sort_keys=True)))
    return rows


def is_postgresql(location):
    return str(location).startswith(POSTGRESQL_SCHEMES)


def open_store(location, create=False):
    """A Store on an SQLite file or a postgresql:// URL. create: make the file and the schema when absent
    (add does; the readers refuse a store that does not exist)."""
    if is_postgresql(location):
        return Store(_PostgreSQL(location), create)
    return Store(_SQLite(location, create), create)


class _SQLite:
    paramstyle_marker = "?"
    id_column = _SQLITE_ID
    name = "SQLite"

    def __init__(self, path, create):
        self.where = str(path)
        if not create and not os.path.isfile(path):
            raise StoreError(f"{path}: no history store here (record runs first: roofbench-history add FILE...)")
        try:
            if create and os.path.dirname(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
            # isolation_level=None: transactions are begun and ended here, explicitly.
            self.connection = sqlite3.connect(path, timeout=_SQLITE_BUSY_TIMEOUT_S, isolation_level=None)
            self.connection.execute("PRAGMA journal_mode=WAL")  # readers do not block the writer
            # With WAL, NORMAL syncs at checkpoints rather than at every commit: a power cut can lose the
            # last runs added (their results files are still there to add again), never corrupt the store.
            self.connection.execute("PRAGMA synchronous=NORMAL")
            self.connection.execute("PRAGMA foreign_keys=ON")
        except (sqlite3.Error, OSError) as error:
            raise StoreError(f"{path}: cannot open as an SQLite history store: {error}") from None

    errors = (sqlite3.Error,)

    def begin_writing(self, cursor):
        cursor.execute("BEGIN IMMEDIATE")  # take the write lock now, waiting out the busy timeout

    def lock_schema(self, cursor):
        pass  # BEGIN IMMEDIATE already serialises writers

    def commit(self, cursor):
        cursor.execute("COMMIT")

    def rollback(self):
        if self.connection.in_transaction:
            self.connection.execute("ROLLBACK")


class _PostgreSQL:
    paramstyle_marker = "%s"
    id_column = _POSTGRESQL_ID
    name = "PostgreSQL"

    def __init__(self, url):
        self.where = _without_password(url)
        try:
            import psycopg2  # Debian's python3-psycopg2; only a PostgreSQL store needs it
        except ImportError:
            raise StoreError(f"{self.where}: a PostgreSQL store needs psycopg2 "
                             "(apt-get install python3-psycopg2)") from None
        self.errors = (psycopg2.Error,)
        try:
            self.connection = psycopg2.connect(url)
        except psycopg2.Error as error:
            raise StoreError(f"{self.where}: cannot connect: {_first_line(error)}") from None

    def begin_writing(self, cursor):
        pass  # psycopg2 opens a transaction with the first statement

    def lock_schema(self, cursor):
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_KEY,))

    def commit(self, cursor):
        self.connection.commit()

    def rollback(self):
        self.connection.rollback()


def _without_password(url):
    scheme, _, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at:
        return url
    return f"{scheme}://{credentials.split(':', 1)[0]}@{host}"


def _first_line(error):
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


class Store:
    def __init__(self, backend, create):
        self.backend = backend
        self.where = backend.where
        if create:
            self._write(self._create_schema)
        elif not self._has_schema():
            raise StoreError(f"{self.where}: not a roofbench history store (no roofbench_runs table)")

    def close(self):
        self.backend.connection.close()

    def _sql(self, text):
        return text.replace("?", self.backend.paramstyle_marker)

    def _create_schema(self, cursor):
        self.backend.lock_schema(cursor)
        for statement in _SCHEMA.format(id=self.backend.id_column).split(";"):
            cursor.execute(statement)

    def _has_schema(self):
        try:
            self._read("SELECT COUNT(*) FROM roofbench_runs WHERE id < 0")
            return True
        except StoreError:
            return False

    def _write(self, work):
        """Runs work(cursor) in one transaction; any database error rolls it back."""
        cursor = self.backend.connection.cursor()
        try:
            self.backend.begin_writing(cursor)
            result = work(cursor)
            self.backend.commit(cursor)
            return result
        except self.backend.errors as error:
            self.backend.rollback()
            raise StoreError(f"{self.where}: {_first_line(error)}") from None
        finally:
            cursor.close()

    def _read(self, query, parameters=()):
        cursor = self.backend.connection.cursor()
        try:
            cursor.execute(self._sql(query), parameters)
            return cursor.fetchall()
        except self.backend.errors as error:
            self.backend.rollback()
            raise StoreError(f"{self.where}: {_first_line(error)}") from None
        finally:
            cursor.close()

    def add_run(self, run, fingerprint, benchmarks, added_at):
        """Records one run; returns its id, or None when the store already holds it."""
        def insert(cursor):
            placeholders = ", ".join("?" * len(_RUN_COLUMNS))
            cursor.execute(self._sql(f"INSERT INTO roofbench_runs ({', '.join(_RUN_COLUMNS)}) VALUES "
                                     f"({placeholders}) ON CONFLICT (fingerprint) DO NOTHING RETURNING id"),
                           run_row(run, fingerprint, added_at))
            inserted = cursor.fetchone()
            if inserted is None:
                return None
            rows = [(inserted[0],) + row for row in result_rows(benchmarks)]
            placeholders = ", ".join("?" * len(_RESULT_COLUMNS))
            cursor.executemany(self._sql(f"INSERT INTO roofbench_results ({', '.join(_RESULT_COLUMNS)}) "
                                         f"VALUES ({placeholders})"), rows)
            return inserted[0]
        return self._write(insert)

    def runs(self):
        """Every run, oldest first (by the date the host wrote, then by the order they were added)."""
        rows = self._read("SELECT id, source, date, commit_id, host, device_key, device_name, device_kind, "
                          "driver, suite, mode, gate_mode, version, complete, ceilings FROM roofbench_runs "
                          "ORDER BY date, id")
        return [RunRecord(*row[:13], complete=bool(row[13]), ceilings=json.loads(row[14])) for row in rows]

    def results(self, run_ids=None):
        """ResultRecords of the given runs (all runs when None), in the order of runs(), then by name."""
        query = ("SELECT r.run_id, r.benchmark, r.median_s, r.q1_s, r.q3_s, r.noise, r.run_count, r.gate, "
                 "r.counters FROM roofbench_results r JOIN roofbench_runs u ON u.id = r.run_id")
        parameters = ()
        if run_ids is not None:
            run_ids = list(run_ids)
            if not run_ids:
                return []
            query += f" WHERE r.run_id IN ({', '.join('?' * len(run_ids))})"
            parameters = tuple(run_ids)
        query += " ORDER BY u.date, u.id, r.benchmark"
        return [ResultRecord(*row) for row in self._read(query, parameters)]

    def run_count(self):
        return self._read("SELECT COUNT(*) FROM roofbench_runs")[0][0]


def check_timed(run):
    """Refuses a run the history cannot hold honestly: a benchmark that reports success with no time, or a
    time that is zero or negative. Raises ResultsError naming the file and the benchmark."""
    for entry in run.entries:
        name = entry.get("name")
        median = entry.get("time_median")
        if median is not None and (finite_number(median) is None or finite_number(median) <= 0):
            raise ResultsError(f"{run.path}: benchmark {name}: time_median {median!r} is not a positive time")
        real_time = finite_number(entry.get("real_time"))
        if entry.get("error_occurred") is not True and median is None and (real_time is None or real_time <= 0):
            raise ResultsError(f"{run.path}: benchmark {name}: no positive time and no error reported")
