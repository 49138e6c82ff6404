"""A throw-away PostgreSQL server for the tests: a fresh cluster (initdb) in a temp folder, listening on a
Unix socket in that folder only, started with pg_ctl and removed when the tests end. Run as root, the
server runs as the postgres user (PostgreSQL refuses root). Without Debian's postgresql package or
python3-psycopg2 the tests that need it are skipped, with the reason."""

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import unittest

_PORT = 5432  # only names the socket file: the server listens on no TCP port
_START_TIMEOUT_S = 60


def _server_binaries():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return os.path.dirname(found[-1]) if found else None


def _as_server_user(command):
    """The command as the user the server runs as: postgres when we are root, else ourselves."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--"] + command


class PostgreSQLServer:
    def __init__(self):
        self.folder = None
        self.binaries = None
        self._databases = 0

    def skip_reason(self):
        try:
            import psycopg2  # noqa: F401  (only whether it is there)
        except ImportError:
            return "python3-psycopg2 is not installed"
        self.binaries = _server_binaries()
        if self.binaries is None:
            return "no PostgreSQL server installed (Debian's postgresql package: /usr/lib/postgresql/*/bin)"
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                return "running as root and there is no postgres user to run the server as"
        return ""

    def start(self):
        self.folder = tempfile.mkdtemp(prefix="roofbench-pg-")
        if os.geteuid() == 0:
            postgres = pwd.getpwnam("postgres")
            os.chown(self.folder, postgres.pw_uid, postgres.pw_gid)
        data = os.path.join(self.folder, "data")
        self._run([os.path.join(self.binaries, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
                   "--no-sync", "-E", "UTF8"])
        self._run([os.path.join(self.binaries, "pg_ctl"), "-D", data, "-w", "-t", str(_START_TIMEOUT_S),
                   "-l", os.path.join(self.folder, "server.log"), "-o",
                   f"-k {self.folder} -p {_PORT} -c listen_addresses='' -c fsync=off", "start"])

    def _run(self, command):
        completed = subprocess.run(_as_server_user(command), capture_output=True, text=True)
        if completed.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {completed.stderr.strip() or completed.stdout.strip()}")

    def url(self, database="postgres"):
        return f"postgresql://postgres@/{database}?host={self.folder}&port={_PORT}"

    def new_database(self):
        """A URL to a database of its own, so tests do not see each other's runs."""
        import psycopg2
        self._databases += 1
        name = f"roofbench_test_{self._databases}"
        connection = psycopg2.connect(self.url())
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {name}")
        connection.close()
        return self.url(name)

    def stop(self):
        if self.folder is None:
            return
        data = os.path.join(self.folder, "data")
        if os.path.isdir(data):
            subprocess.run(_as_server_user([os.path.join(self.binaries, "pg_ctl"), "-D", data, "-m", "immediate",
                                            "-w", "stop"]), capture_output=True)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None


def server_for(test_class):
    """A server for one test class, stopped and removed by its class cleanup; skips the class (with the
    reason) where PostgreSQL or psycopg2 is missing."""
    server = PostgreSQLServer()
    reason = server.skip_reason()
    if reason:
        raise unittest.SkipTest(reason)
    test_class.addClassCleanup(server.stop)
    server.start()
    return server
