"""A real, throwaway PostgreSQL server for the tests (and for CI).

Why: the durable scheduler's PostgreSQL store must be tested against a real server, including
restarts, crashes (SIGKILL, then crash recovery) and backends killed under a live connection. A
mock cannot show any of that. This module makes a private cluster in a directory of its own:

* ``initdb --auth=trust -U postgres --no-sync --locale=C`` (``--no-sync`` only skips the fsync of
  the freshly made files; the server runs with ``fsync=on`` so that crash tests mean something);
* ``listen_addresses=''``: no TCP at all, only a unix socket in ``<dir>/sock`` (mode 0755, so any
  local user may connect); ``max_connections=200`` (many worker processes with pools connect);
* ``pg_ctl -w -t 60 -l <datadir>/server.log start``.

initdb refuses to run as root, so when this process is root every server command runs as the
unprivileged user that owns the data directory (``postgres`` for a new cluster) through
``runuser -u USER --``; otherwise the commands run as the current user.

URLs look like ``postgresql://postgres@/DBNAME?host=/path/to/sockdir`` (the port is the default
5432; each cluster has its own socket directory, so clusters do not collide).

Layout of a cluster directory ``DIR``: ``DIR/data`` (the data directory, with ``server.log`` in
it) and ``DIR/sock`` (the socket directory).

Command line, used by ``.ci/run``::

    python -m tests.pgserver start DIR   # init if needed, start; prints `export` lines on stdout
    python -m tests.pgserver stop DIR    # fast shutdown; nothing to do if it is not running
    python -m tests.pgserver bindir      # prints the server binaries' directory, or exits 1

``start`` prints ``export REFSCHED_TEST_PGDATA=...`` (the data directory) and
``export REFSCHED_TEST_PGHOST=...`` (the socket directory); ``eval`` them. With those two variables
set, :meth:`PostgresCluster.from_env` returns a :class:`PostgresCluster` that controls that
cluster (start, stop, restart, kill, terminate), which is what the ``postgres_cluster`` fixture of
``tests/conftest.py`` does before it considers starting a server of its own.

Standard library only, plus psycopg for the SQL helpers (imported when first needed).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

ENV_PGDATA = "REFSCHED_TEST_PGDATA"
ENV_PGHOST = "REFSCHED_TEST_PGHOST"

#: The unprivileged user a new cluster runs as when this process is root.
DEFAULT_OS_USER = "postgres"
PORT = 5432
_SERVER_PROGRAMS = ("initdb", "pg_ctl", "postgres")
_DB_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
# sun_path holds 108 bytes; the server adds "/.s.PGSQL.5432.lock".
_MAX_SOCKDIR = 107 - len(f"/.s.PGSQL.{PORT}.lock")


class PostgresUnavailable(RuntimeError):
    """No server can be made or started here; the message says why."""


def find_bindir() -> Path:
    """The directory of initdb, pg_ctl and postgres.

    ``pg_config --bindir`` first (when that directory really holds the server programs: a
    client-only install has a pg_config too), then the newest ``/usr/lib/postgresql/*/bin``, then
    ``PATH``.
    """
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                 timeout=30, check=True).stdout.strip()
            if out:
                candidates.append(Path(out))

    def version(path: str) -> tuple[int, ...]:
        name = Path(path).parent.name
        return tuple(int(p) for p in re.findall(r"\d+", name)) or (0,)

    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                                           key=version, reverse=True)]
    for bindir in candidates:
        if all(os.access(bindir / prog, os.X_OK) for prog in _SERVER_PROGRAMS):
            return bindir
    on_path = [shutil.which(prog) for prog in _SERVER_PROGRAMS]
    if all(on_path):
        dirs = {Path(p).parent for p in on_path if p}
        if len(dirs) == 1:
            return dirs.pop()
    raise PostgresUnavailable(
        "no PostgreSQL server programs (initdb, pg_ctl, postgres) found via pg_config --bindir, "
        "/usr/lib/postgresql/*/bin or PATH"
    )


def _proc_state(pid: int) -> str | None:
    """The /proc state letter of ``pid`` (``Z`` for a zombie), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return "?"
        return "?"
    return stat[stat.rindex(")") + 2:].split()[0]


def _alive(pid: int) -> bool:
    return _proc_state(pid) not in (None, "Z", "X")


def _children(pid: int) -> list[int]:
    found = []
    for entry in glob.glob("/proc/[0-9]*/stat"):
        try:
            stat = Path(entry).read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
            found.append(int(Path(entry).parent.name))
    return found


class PostgresCluster:
    """A private PostgreSQL cluster: a data directory and a socket directory.

    ``PostgresCluster(DIR)`` uses ``DIR/data`` and ``DIR/sock`` (made by :meth:`start`, which runs
    initdb when the data directory is empty). ``PostgresCluster.attach(datadir, sockdir)``
    controls an existing cluster; :meth:`from_env` attaches to the one named by the environment.
    """

    def __init__(self, base_dir: str | os.PathLike[str] | None = None, *,
                 datadir: str | os.PathLike[str] | None = None,
                 sockdir: str | os.PathLike[str] | None = None,
                 bindir: str | os.PathLike[str] | None = None,
                 os_user: str | None = None) -> None:
        if base_dir is not None:
            base = Path(base_dir).absolute()
            self.base_dir: Path | None = base
            self.datadir = Path(datadir).absolute() if datadir else base / "data"
            self.sockdir = Path(sockdir).absolute() if sockdir else base / "sock"
        elif datadir is not None and sockdir is not None:
            self.base_dir = None
            self.datadir = Path(datadir).absolute()
            self.sockdir = Path(sockdir).absolute()
        else:
            raise TypeError("give base_dir, or both datadir and sockdir")
        self.logfile = self.datadir / "server.log"
        self._bindir = Path(bindir) if bindir is not None else None
        self._os_user = os_user

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def attach(cls, datadir: str | os.PathLike[str],
               sockdir: str | os.PathLike[str]) -> PostgresCluster:
        """Control an existing cluster (as the user that owns its data directory, when root)."""
        return cls(datadir=datadir, sockdir=sockdir)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PostgresCluster | None:
        """The cluster named by REFSCHED_TEST_PGDATA and REFSCHED_TEST_PGHOST, or None."""
        env = os.environ if environ is None else environ
        datadir, sockdir = env.get(ENV_PGDATA), env.get(ENV_PGHOST)
        if not datadir or not sockdir:
            return None
        return cls.attach(datadir, sockdir)

    # -- properties ---------------------------------------------------------------------------

    @property
    def bindir(self) -> Path:
        if self._bindir is None:
            self._bindir = find_bindir()
        return self._bindir

    @property
    def os_user(self) -> str | None:
        """The user the server commands run as through runuser; None: as this process."""
        if os.geteuid() != 0:
            return None
        if self._os_user is None:
            try:
                owner = self.datadir.stat().st_uid
            except OSError:
                owner = 0
            if owner != 0:
                self._os_user = pwd.getpwuid(owner).pw_name
            else:
                try:
                    pwd.getpwnam(DEFAULT_OS_USER)
                except KeyError:
                    raise PostgresUnavailable(
                        f"running as root, and there is no {DEFAULT_OS_USER!r} user to run the "
                        "server as (initdb refuses root)") from None
                self._os_user = DEFAULT_OS_USER
        return self._os_user

    @property
    def pid(self) -> int | None:
        """The postmaster's pid from postmaster.pid, if that process is alive."""
        try:
            first = (self.datadir / "postmaster.pid").read_text().split("\n", 1)[0]
            pid = int(first)
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def initialized(self) -> bool:
        return (self.datadir / "PG_VERSION").exists()

    @property
    def base_url(self) -> str:
        """The URL of the ``postgres`` database."""
        return self.url("postgres")

    def url(self, dbname: str) -> str:
        return f"postgresql://postgres@/{quote(dbname, safe='')}?host={quote(str(self.sockdir))}"

    # -- server commands ----------------------------------------------------------------------

    def _run(self, args: Sequence[str | os.PathLike[str]], *, timeout: float = 120,
             check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [os.fspath(a) for a in args]
        user = self.os_user
        if user is not None:
            argv = ["runuser", "-u", user, "--", *argv]
        env = dict(os.environ, LC_ALL="C", LANG="C")
        for var in ("PGDATA", "PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGOPTIONS"):
            env.pop(var, None)
        cwd = self.base_dir if self.base_dir is not None and self.base_dir.is_dir() else "/"
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env=env, cwd=cwd, stdin=subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise PostgresUnavailable(
                f"{shlex.join(argv)} exited with {proc.returncode}\n"
                f"{proc.stdout}{proc.stderr}{self._log_tail()}")
        return proc

    def _log_tail(self, lines: int = 30) -> str:
        try:
            text = self.logfile.read_text(errors="replace")
        except OSError:
            return ""
        return f"--- last lines of {self.logfile}:\n" + "\n".join(text.splitlines()[-lines:])

    def _chown(self, path: Path) -> None:
        user = self.os_user
        if user is not None:
            ent = pwd.getpwnam(user)
            os.chown(path, ent.pw_uid, ent.pw_gid)

    def init(self) -> None:
        """initdb the data directory and write the settings (no-op when already done)."""
        if self.initialized:
            return
        if len(str(self.sockdir)) > _MAX_SOCKDIR:
            raise PostgresUnavailable(
                f"socket directory path too long for a unix socket: {self.sockdir}")
        for d in (self.base_dir, self.sockdir, self.datadir):
            if d is None:
                continue
            d.mkdir(parents=True, exist_ok=True)
            self._chown(d)
        self.sockdir.chmod(0o755)
        if self.base_dir is not None:
            self.base_dir.chmod(0o755)
        self.datadir.chmod(0o700)
        user = self.os_user
        if user is not None and self._run(["test", "-w", self.datadir], check=False).returncode:
            raise PostgresUnavailable(
                f"user {user!r} cannot reach {self.datadir} (a parent directory is closed to it)")
        self._run([self.bindir / "initdb", "-D", self.datadir, "--auth=trust", "-U", "postgres",
                   "--no-sync", "--locale=C", "--encoding=UTF8"])
        settings = {
            "listen_addresses": "''",
            "unix_socket_directories": f"'{self.sockdir}'",
            "unix_socket_permissions": "0777",
            "port": str(PORT),
            "max_connections": "200",
            "fsync": "on",
            "log_line_prefix": "'%m [%p] %q%a@%d '",
        }
        major = int((self.datadir / "PG_VERSION").read_text().strip().split(".")[0])
        if major >= 14 and sys.platform.startswith("linux"):
            # Crash recovery first syncs the data directory: one syncfs() instead of an fsync of
            # every file (the same guarantee, seconds faster on a fresh cluster).
            settings["recovery_init_sync_method"] = "syncfs"
        conf = "".join(f"{k} = {v}\n" for k, v in settings.items())
        # Appending keeps the file's owner (the cluster's user).
        with (self.datadir / "postgresql.conf").open("a") as f:
            f.write("\n# tests/pgserver.py\n" + conf)

    def start(self) -> None:
        """Init if needed, then start and wait until the server accepts connections."""
        if self.running:
            return
        self.init()
        self._forget_dead_postmaster()
        self._run([self.bindir / "pg_ctl", "-D", self.datadir, "-w", "-t", "60",
                   "-l", self.logfile, "start"])

    def stop(self, mode: str = "fast") -> None:
        """Shut down (no-op when not running)."""
        if not self.running:
            return
        self._run([self.bindir / "pg_ctl", "-D", self.datadir, "-w", "-t", "60", "-m", mode,
                   "stop"])

    def restart(self, mode: str = "fast") -> None:
        """Shut down with ``mode`` (smart, fast, immediate) and start again."""
        if not self.running:
            self.start()
            return
        self._run([self.bindir / "pg_ctl", "-D", self.datadir, "-w", "-t", "60", "-m", mode,
                   "-l", self.logfile, "restart"])

    def kill(self, timeout: float = 30) -> None:
        """SIGKILL the postmaster and every process of the server: a crash.

        Returns once they are all gone. The next :meth:`start` runs crash recovery (WAL replay);
        committed transactions survive it, since the server runs with fsync on.
        """
        pid = self.pid
        if pid is None:
            return
        procs = [pid, *_children(pid)]
        try:
            same_group = os.getpgid(pid) == pid
        except ProcessLookupError:
            same_group = False
        with contextlib.suppress(ProcessLookupError):
            if same_group:  # pg_ctl starts the postmaster as a session (and group) leader
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        for child in procs[1:]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while any(_alive(p) for p in procs):
            if time.monotonic() > deadline:
                raise PostgresUnavailable(f"server processes outlived SIGKILL: {procs}")
            time.sleep(0.01)
        self._forget_dead_postmaster()

    def _forget_dead_postmaster(self) -> None:
        """Remove the lock files of a postmaster that is gone.

        A killed postmaster whose parent does not reap it stays a zombie, and the server takes a
        lock file naming a pid that kill(pid, 0) still finds for a live postmaster; as after a
        reboot, the files of a dead server can simply go.
        """
        try:
            pid = int((self.datadir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return
        if _alive(pid):
            return
        for lock in (self.datadir / "postmaster.pid", self.sockdir / f".s.PGSQL.{PORT}.lock",
                     self.sockdir / f".s.PGSQL.{PORT}"):
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()

    # -- SQL helpers (psycopg) ----------------------------------------------------------------

    def connect(self, dbname: str = "postgres", **kwargs: Any) -> Any:
        """An autocommit psycopg connection to ``dbname``."""
        import psycopg

        kwargs.setdefault("connect_timeout", 10)
        kwargs.setdefault("autocommit", True)
        return psycopg.connect(self.url(dbname), **kwargs)

    @staticmethod
    def _check_name(name: str) -> str:
        if not _DB_NAME.fullmatch(name):
            raise ValueError(f"not a plain database name: {name!r}")
        return name

    def create_database(self, name: str) -> str:
        """``CREATE DATABASE name``; returns its URL."""
        from psycopg import sql

        with self.connect() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(
                sql.Identifier(self._check_name(name))))
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Terminate the database's backends, then drop it (if it exists)."""
        from psycopg import sql

        self.terminate(name)
        with self.connect() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(self._check_name(name))))

    def terminate(self, dbname: str, *, application_name: str | None = None,
                  pid: int | None = None, timeout_ms: int = 10_000) -> int:
        """``pg_terminate_backend`` the backends connected to ``dbname``.

        Only those with that ``application_name`` and/or backend ``pid`` when given. Waits (up to
        ``timeout_ms``) until they are gone; returns how many were terminated. The clients see an
        error (psycopg.OperationalError) on their next query.
        """
        query = ("SELECT pid FROM pg_stat_activity WHERE datname = %s"
                 " AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
        params: list[Any] = [dbname]
        if application_name is not None:
            query += " AND application_name = %s"
            params.append(application_name)
        if pid is not None:
            query += " AND pid = %s"
            params.append(pid)
        with self.connect() as conn:
            pids = [row[0] for row in conn.execute(query, params).fetchall()]
            wait = conn.info.server_version >= 140000
            for backend in pids:
                if wait:  # PostgreSQL 14+: waits until the backend has exited
                    conn.execute("SELECT pg_terminate_backend(%s, %s)", (backend, timeout_ms))
                else:
                    conn.execute("SELECT pg_terminate_backend(%s)", (backend,))
            if not wait and pids:
                deadline = time.monotonic() + timeout_ms / 1000
                while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)",
                                   (pids,)).fetchone()[0]:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)
        return len(pids)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.pgserver",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    p_start = sub.add_parser("start", help="init DIR if needed, start; print export lines")
    p_start.add_argument("dir")
    p_stop = sub.add_parser("stop", help="stop the cluster in DIR (if running)")
    p_stop.add_argument("dir")
    sub.add_parser("bindir", help="print the server programs' directory (exit 1: none)")
    args = parser.parse_args(argv)
    try:
        if args.command == "bindir":
            print(find_bindir())
            return 0
        cluster = PostgresCluster(args.dir)
        if args.command == "start":
            cluster.start()
            print(f"export {ENV_PGDATA}={shlex.quote(str(cluster.datadir))}")
            print(f"export {ENV_PGHOST}={shlex.quote(str(cluster.sockdir))}")
            print(f"pgserver: running at {cluster.base_url}", file=sys.stderr)
        else:
            cluster.stop()
    except (PostgresUnavailable, OSError, subprocess.SubprocessError) as exc:
        print(f"pgserver: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
