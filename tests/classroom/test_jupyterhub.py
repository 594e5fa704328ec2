"""A real JupyterHub on 127.0.0.1 with a class of students, as an instructor would run one.

One test, in the order a class lives it: the hub starts (DummyAuthenticator, SimpleLocalProcessSpawner,
the Python configurable-http-proxy, random free ports, a random service token). `STUDENTS` students
arrive at once: each asks the hub for a server through the REST API and, once it is ready, starts a
kernel and runs a first cell in it (timed from the request to that cell's reply: the time to a
running kernel), then opens an nbgitpuller link and pulls the lessons from a local bare clone of
this repository. Every student then runs each lesson of `LESSONS` through a kernel of their own, all
students at the same time (widget cells are driven by the lessons' own "drive it" cells, from code),
timing every cell from its execute request to its reply, while the memory of each student's server
and kernels and of everything the hub started is sampled every `SAMPLE_SECONDS`; every exercise's
check must say "correct" after its solution ran and every ordinary cell must print what the
committed notebook stores. Then every student types into the first exercise of each lesson and saves
(one also into lesson 01, another deletes lesson 07); every server is stopped and started again, and
every saved file must be on disk byte for byte and served back as typed. The instructor pushes an
update to lesson 01 and the README; every student pulls again, which brings the update in, keeps every
file typed into byte for byte (lesson 01's answer beside the new title) and restores the deleted
lesson. Everything is stopped.

The measurements (memory per student and lesson, the hub's total, times to a running kernel, every
cell's latency, the restart) are printed and, with ``CLASSROOM_MEMORY_JSON=path``, written as JSON:
the README's sizing table ("How much memory a student needs") comes from it. ``CLASSROOM_STUDENTS``
(at least 2) and ``CLASSROOM_HUB_LESSONS`` (comma-separated lesson names) change the class. No timing
is asserted: only the time-outs below, generous for a loaded 2-core machine, can fail a slow run.
Needs ``requirements-classroom.txt``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import signal
import socket
import statistics
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from classroom_support import BIN, REPO, require, tool_env

STUDENTS = int(os.environ.get("CLASSROOM_STUDENTS", "4"))
LESSONS = tuple(os.environ.get("CLASSROOM_HUB_LESSONS", "05_inspecting_heads,09_heads_at_work").split(","))
TARGET = "several-heads"  # the folder nbgitpuller clones into, in each student's home
START_SECONDS = 600.0  # a server's start (the hub's own time-out too) and the hub's
API_SECONDS = 300.0  # one request to the hub or a server
CELL_SECONDS = 900.0  # the longest wait for the next message of a running cell
PULL_SECONDS = 600.0  # one nbgitpuller pull
SAMPLE_SECONDS = 0.2
MIB = 1024.0 * 1024.0
# nbval's sanitize rules (tests/nbval_sanitize.cfg), applied to both sides of an output comparison.
SANITIZE = [
    (re.compile(r"at 0x[0-9a-fA-F]+"), "at 0x<address>"),
    (re.compile(r"/tmp/ipykernel_\d+/\d+\.py"), "<ipykernel>"),
]
T = TypeVar("T")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Hub:
    url: str
    token: str
    process: subprocess.Popen[bytes]
    folder: Path
    bare: Path
    branch: str
    log: Path

    def api(self, method: str, path: str, body: Any = None, timeout: float = API_SECONDS) -> Any:
        """A JSON request to the hub (``/hub/api/...``) or a server (``/user/...``) with the service token."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"token {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read().decode()
        return json.loads(text) if text.strip() else None

    def home(self, student: str) -> Path:
        return self.folder / "homes" / student

    def pull(self, student: str) -> list[dict[str, Any]]:
        """What an nbgitpuller link does once its page is open: the pull, through its event stream."""
        query = urllib.parse.urlencode({"repo": self.bare.as_uri(), "branch": self.branch, "targetpath": TARGET})
        request = urllib.request.Request(f"{self.url}/user/{student}/git-pull/api?{query}")
        request.add_header("Authorization", f"token {self.token}")
        events = []
        with urllib.request.urlopen(request, timeout=PULL_SECONDS) as response:
            for raw in response:
                line = raw.decode().strip()
                if line.startswith("data:"):
                    events.append(json.loads(line[len("data:") :]))
        return events


def _write_config(folder: Path, port: int, token: str) -> Path:
    config = folder / "jupyterhub_config.py"
    settings = {
        "ip": "127.0.0.1",
        "port": port,
        "hub_port": _free_port(),
        "proxy_api": f"http://127.0.0.1:{_free_port()}",
        "proxy": str(BIN / "configurable-http-proxy"),
        "singleuser": str(BIN / "jupyterhub-singleuser"),
        "homes": str(folder / "homes" / "{username}"),
        "db": f"sqlite:///{folder / 'jupyterhub.sqlite'}",
        "cookie": str(folder / "cookie_secret"),
        "token": token,
        "root": os.geteuid() == 0,
        "timeout": int(START_SECONDS),
    }
    config.write_text(
        f"""settings = {settings!r}
c = get_config()  # noqa: F821
c.JupyterHub.ip = settings["ip"]
c.JupyterHub.port = settings["port"]
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = settings["hub_port"]
c.ConfigurableHTTPProxy.api_url = settings["proxy_api"]
c.ConfigurableHTTPProxy.command = [settings["proxy"]]
c.JupyterHub.db_url = settings["db"]
c.JupyterHub.cookie_secret_file = settings["cookie"]
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allow_all = True
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = settings["homes"]
c.Spawner.cmd = [settings["singleuser"]]
c.Spawner.args = ["--allow-root"] if settings["root"] else []  # CI runs as root; no user switches here
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = settings["timeout"]
c.Spawner.http_timeout = settings["timeout"]
c.JupyterHub.services = [{{"name": "classroom-test", "api_token": settings["token"]}}]
c.JupyterHub.load_roles = [{{
    "name": "classroom-test",
    "scopes": ["admin:users", "admin:servers", "admin:server_state", "access:servers", "list:users"],
    "services": ["classroom-test"],
}}]
c.JupyterHub.cleanup_servers = True
c.JupyterHub.cleanup_proxy = True
""",
        encoding="utf-8",
    )
    return config


def _git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    require("jupyterhub", "nbgitpuller", "configurable_http_proxy", "psutil")
    folder = tmp_path_factory.mktemp("hub")
    bare = folder / "several-heads.git"
    _git("clone", "--quiet", "--bare", str(REPO), str(bare))
    branch = _git("symbolic-ref", "--short", "HEAD", cwd=bare)
    port, token = _free_port(), secrets.token_hex(32)
    config = _write_config(folder, port, token)
    log = folder / "jupyterhub.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(BIN / "jupyterhub"), "-f", str(config)],
            cwd=folder,
            env=tool_env(),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the teardown can end exactly what it started
        )
    running = Hub(f"http://127.0.0.1:{port}", token, process, folder, bare, branch, log)
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                running.api("GET", "/hub/api/")
                break
            except (urllib.error.URLError, ConnectionError):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterHub did not start:\n{log.read_text()[-3000:]}") from None
                time.sleep(0.5)
        yield running
    finally:
        _stop_hub(running)


def _stop_hub(hub: Hub) -> None:
    if hub.process.poll() is None:
        hub.process.send_signal(signal.SIGTERM)  # the hub stops its servers and its proxy
        try:
            hub.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(hub.process.pid, signal.SIGKILL)
            hub.process.wait(timeout=30)


class Sampler:
    """Resident memory (RSS, bytes) from one scan of the process table every `SAMPLE_SECONDS`, in a thread.

    Kept as peaks since the last `reset`: each student's server with every process under it (its
    kernels), everything under the hub (the hub, its proxy, every server and kernel), and the hub with
    its proxy alone. RSS counts a shared library in every process that maps it, so the sums are an upper
    bound of what the processes take together."""

    def __init__(self, hub_pid: int) -> None:
        self.hub_pid = hub_pid
        self.servers: dict[str, int] = {}  # student -> server pid, set while every server is known
        self.students: dict[str, int] = {}
        self.total = self.own = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> None:
        import psutil

        rss: dict[int, int] = {}
        children: dict[int, list[int]] = {}
        for process in psutil.process_iter(["ppid", "memory_info"]):
            if process.info["memory_info"] is None:  # gone, or not ours to read
                continue
            rss[process.pid] = process.info["memory_info"].rss
            children.setdefault(process.info["ppid"], []).append(process.pid)

        def tree(root: int) -> int:
            total, stack = 0, [root]
            while stack:
                pid = stack.pop()
                total += rss.get(pid, 0)
                stack.extend(children.get(pid, []))
            return total

        with self.lock:
            total = tree(self.hub_pid)
            self.total = max(self.total, total)
            if self.servers:
                students = {student: tree(pid) for student, pid in self.servers.items()}
                for student, used in students.items():
                    self.students[student] = max(self.students.get(student, 0), used)
                self.own = max(self.own, total - sum(students.values()))

    def _loop(self) -> None:
        while not self.stopping.is_set():
            self.sample()
            self.stopping.wait(SAMPLE_SECONDS)

    def reset(self, servers: dict[str, int]) -> None:
        with self.lock:
            self.servers = dict(servers)
            self.students = {}
            self.total = self.own = 0

    def peaks(self) -> dict[str, Any]:
        """The peaks since the last reset, in MiB."""
        with self.lock:
            return {
                "students": {student: round(used / MIB, 1) for student, used in sorted(self.students.items())},
                "hub_total": round(self.total / MIB, 1),
                "hub_and_proxy": round(self.own / MIB, 1) if self.servers else None,
            }


def _high_water_mib(pid: int) -> float:
    """A process's own peak resident memory (VmHWM), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmHWM for {pid}")


def _created(pid: int) -> float:
    """When the process started: with its pid, it names the process even after Linux reuses the pid."""
    import psutil

    return float(psutil.Process(pid).create_time())


def _running(pid: int, created: float) -> bool:
    """Whether that very process (not another that got its pid since) still runs."""
    import psutil

    try:
        process = psutil.Process(pid)
        return bool(process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _percentile(values: list[float], percent: int) -> float:
    """The nearest-rank percentile: the smallest value with at least `percent` % of the values at or below it."""
    ordered = sorted(values)
    rank = max(1, -(-percent * len(ordered) // 100))
    return ordered[rank - 1]


def _spread(values: list[float], digits: int = 1) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), digits),
        "p95": round(_percentile(values, 95), digits),
        "max": round(max(values), digits),
    }


def _sanitized(text: str) -> str:
    for pattern, replacement in SANITIZE:
        text = pattern.sub(replacement, text)
    return text


def _printed(outputs: list[dict[str, Any]]) -> str:
    """What a cell printed (stdout and plain-text results): the part of its output compared."""
    parts = []
    for output in outputs:
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            text = output["text"]
            parts.append("".join(text) if isinstance(text, list) else text)
        elif output.get("output_type") == "execute_result":
            text = output.get("data", {}).get("text/plain", "")
            parts.append("".join(text) if isinstance(text, list) else text)
    return _sanitized("".join(parts))


def _message_json(raw: str | bytes) -> str:
    """The JSON part of a kernel message from the websocket: text, or jupyter_server's binary frame
    (a message with buffers, such as a widget's: a count, offsets, the JSON, then the buffers)."""
    if isinstance(raw, str):
        return raw
    count = int.from_bytes(raw[:4], "big")
    offsets = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(count)]
    end = offsets[1] if count > 1 else len(raw)
    return raw[offsets[0] : end].decode("utf-8")


def _run_order(cells: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """Code cells as a learner runs them: each check once on the blank exercise ("blank"), and once
    more right after the exercise's solution ("solved"); every other code cell once, in order ("")."""
    order: list[tuple[int, str]] = []
    waiting: int | None = None
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        tags = cell.get("metadata", {}).get("tags", [])
        if "check" in tags:
            waiting = index
            order.append((index, "blank"))
            continue
        order.append((index, ""))
        if "solution" in tags and waiting is not None:
            order.append((waiting, "solved"))
            waiting = None
    assert waiting is None, "a check cell without a solution after it"
    return order


def _together(students: list[str], work: Callable[[str], Awaitable[T]]) -> list[T]:
    """`work` for every student at the same time, in one event loop; blocking requests run in threads,
    enough for every student to wait on several at once."""

    async def everyone() -> list[T]:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=4 * len(students) + 4))
        return list(await asyncio.gather(*(work(student) for student in students)))

    return asyncio.run(everyone())


class Kernel:
    """One of a student's kernels, driven over the server's websocket as JupyterLab drives it."""

    def __init__(self, hub: Hub, student: str, kernel_id: str) -> None:
        self.hub, self.student, self.id = hub, student, kernel_id
        self.session = uuid.uuid4().hex
        self.connection: Any = None

    async def connect(self) -> None:
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        url = self.hub.url.replace("http", "ws", 1) + f"/user/{self.student}/api/kernels/{self.id}/channels"
        request = HTTPRequest(url, headers={"Authorization": f"token {self.hub.token}"}, request_timeout=API_SECONDS)
        self.connection = await websocket_connect(request)

    async def execute(self, code: str) -> tuple[list[dict[str, Any]], float]:
        """Run `code`; return its outputs and its latency, from the execute request to the execute reply."""
        msg_id = uuid.uuid4().hex
        header = {"msg_id": msg_id, "username": self.student, "session": self.session, "msg_type": "execute_request",
                  "version": "5.3", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
        content = {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                   "allow_stdin": False, "stop_on_error": True}  # fmt: skip
        message = {"header": header, "parent_header": {}, "metadata": {}, "content": content, "channel": "shell"}
        sent = time.monotonic()
        await self.connection.write_message(json.dumps(message))
        outputs: list[dict[str, Any]] = []
        latency: float | None = None
        idle = False
        while not (idle and latency is not None):
            raw = await asyncio.wait_for(self.connection.read_message(), timeout=CELL_SECONDS)
            assert raw is not None, f"{self.student}: the kernel's websocket closed"
            reply = json.loads(_message_json(raw))
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = reply["header"]["msg_type"]
            if reply.get("channel") == "shell" and kind == "execute_reply":
                latency = time.monotonic() - sent
            elif kind == "status" and reply["content"].get("execution_state") == "idle":
                idle = True
            elif kind in ("stream", "execute_result", "display_data", "error"):
                outputs.append({"output_type": kind, **reply["content"]})
        assert latency is not None
        return outputs, latency

    async def pid(self) -> int:
        outputs, _ = await self.execute("import os\nprint(os.getpid())")
        return int(_printed(outputs).strip())

    def close(self) -> None:
        self.connection.close()


async def _call(hub: Hub, method: str, path: str, body: Any = None) -> Any:
    return await asyncio.to_thread(hub.api, method, path, body)


async def _start_server(hub: Hub, student: str) -> dict[str, Any]:
    """What a student's first click does: the hub starts their server; timed from the request to a
    first cell's reply in a kernel of their own (started, as JupyterLab does, once the server is up)."""
    asked = time.monotonic()
    await _call(hub, "POST", f"/hub/api/users/{student}/server")
    while True:
        server = (await _call(hub, "GET", f"/hub/api/users/{student}"))["servers"].get("", {})
        if server.get("ready"):
            break
        assert time.monotonic() < asked + START_SECONDS, f"{student}'s server did not start:\n{_log_tail(hub)}"
        await asyncio.sleep(0.5)
    ready = time.monotonic()
    model = await _call(hub, "POST", f"/user/{student}/api/kernels", {"name": "python3"})
    kernel = Kernel(hub, student, model["id"])
    await kernel.connect()
    kernel_pid = await kernel.pid()
    answered = time.monotonic()
    kernel_created = _created(kernel_pid)
    kernel.close()
    await _call(hub, "DELETE", f"/user/{student}/api/kernels/{model['id']}")
    server_pid = int(server["state"]["pid"])
    return {
        "student": student,
        "server_pid": server_pid,
        "server_created": _created(server_pid),
        "kernel_pid": kernel_pid,
        "kernel_created": kernel_created,
        "server_ready_seconds": round(ready - asked, 2),
        "running_kernel_seconds": round(answered - asked, 2),
    }


async def _stop_server(hub: Hub, student: str) -> None:
    asked = time.monotonic()
    await _call(hub, "DELETE", f"/hub/api/users/{student}/server")
    while "" in (await _call(hub, "GET", f"/hub/api/users/{student}"))["servers"]:
        assert time.monotonic() < asked + START_SECONDS, f"{student}'s server did not stop:\n{_log_tail(hub)}"
        await asyncio.sleep(0.5)


def _log_tail(hub: Hub) -> str:
    return hub.log.read_text(encoding="utf-8", errors="replace")[-3000:]


async def _open_link(hub: Hub, student: str) -> float:
    """The link an instructor hands out, opened by a student: nbgitpuller's page, then its pull; timed."""
    query = urllib.parse.urlencode({"repo": hub.bare.as_uri(), "branch": hub.branch, "targetpath": TARGET,
                                    "urlpath": f"lab/tree/{TARGET}/notebooks/{LESSONS[0]}.ipynb"})  # fmt: skip
    request = urllib.request.Request(f"{hub.url}/user/{student}/git-pull?{query}")
    request.add_header("Authorization", f"token {hub.token}")

    def page() -> bytes:
        with urllib.request.urlopen(request, timeout=API_SECONDS) as response:
            assert response.status == 200
            return bytes(response.read())

    started = time.monotonic()
    assert b"nbgitpuller" in (await asyncio.to_thread(page)).lower()
    events = await asyncio.to_thread(hub.pull, student)
    assert events and events[-1].get("phase") == "finished", f"{student}: {events[-3:]}"
    return round(time.monotonic() - started, 2)


async def _run_lesson(hub: Hub, student: str, lesson: str) -> dict[str, Any]:
    """Run one lesson through a kernel of the student's own, over the server's websocket; return a report."""
    path = f"{TARGET}/notebooks/{lesson}.ipynb"
    notebook = json.loads((hub.home(student) / path).read_text(encoding="utf-8"))
    wanted = {"path": path, "type": "notebook", "name": f"{lesson}.ipynb", "kernel": {"name": "python3"}}
    session = await _call(hub, "POST", f"/user/{student}/api/sessions", wanted)
    kernel = Kernel(hub, student, session["kernel"]["id"])
    await kernel.connect()
    started = time.monotonic()
    kernel_pid = await kernel.pid()
    kernel_created = _created(kernel_pid)
    problems: list[str] = []
    verdicts: list[str] = []
    cells: list[tuple[int, float]] = []
    for index, phase in _run_order(notebook["cells"]):
        cell = notebook["cells"][index]
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        outputs, latency = await kernel.execute(source)
        cells.append((index, round(latency, 3)))
        errors = [o for o in outputs if o["output_type"] == "error"]
        if errors:
            problems.append(f"cell {index} raised {errors[0]['ename']}: {errors[0]['evalue']}")
            break
        tags = cell.get("metadata", {}).get("tags", [])
        if phase == "blank" and "not answered yet" not in _printed(outputs):
            problems.append(f"cell {index}, a check on the blank exercise, printed {_printed(outputs)!r}")
        elif phase == "solved":
            verdicts.append(_printed(outputs).strip())
        elif not {"exercise", "check", "solution", "nbval-ignore-output"} & set(tags):
            fresh, stored = _printed(outputs), _printed(cell.get("outputs", []))
            if fresh != stored:
                problems.append(f"cell {index} printed {fresh[:300]!r}, stored {stored[:300]!r}")
    import psutil

    kernel_peak = _high_water_mib(kernel_pid)
    cpu = psutil.Process(kernel_pid).cpu_times()
    seconds = time.monotonic() - started
    kernel.close()
    await _call(hub, "DELETE", f"/user/{student}/api/sessions/{session['id']}")
    return {
        "student": student,
        "lesson": lesson,
        "kernel_pid": kernel_pid,
        "kernel_created": kernel_created,
        "seconds": round(seconds, 1),
        "kernel_peak_mib": round(kernel_peak, 1),
        "kernel_cpu_seconds": round(cpu.user + cpu.system, 1),  # the processor time the lesson took
        "problems": problems,
        "checks": sum("check" in c.get("metadata", {}).get("tags", []) for c in notebook["cells"]),
        "verdicts": verdicts,
        "cell_seconds": cells,  # (cell index, latency) in the order run
    }


def _type_and_save(hub: Hub, student: str, lesson: str, text: str) -> bytes:
    """The student types `text` into the lesson's first exercise cell and saves, through the server's
    contents API, as JupyterLab saves; returns the saved file's bytes."""
    path = f"{TARGET}/notebooks/{lesson}.ipynb"
    model = hub.api("GET", f"/user/{student}/api/contents/{path}")
    cell = next(c for c in model["content"]["cells"] if "exercise" in c["metadata"].get("tags", []))
    cell["source"] = text
    saved = {"type": "notebook", "format": "json", "content": model["content"]}
    hub.api("PUT", f"/user/{student}/api/contents/{path}", saved)
    return (hub.home(student) / path).read_bytes()


def _served_exercise(hub: Hub, student: str, lesson: str) -> str:
    """The first exercise cell of the lesson as the student's server serves it."""
    model = hub.api("GET", f"/user/{student}/api/contents/{TARGET}/notebooks/{lesson}.ipynb")
    cell = next(c for c in model["content"]["cells"] if "exercise" in c["metadata"].get("tags", []))
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else str(source)


def _summary(record: dict[str, Any]) -> dict[str, Any]:
    """Medians, 95th percentiles (nearest rank) and maxima of what was measured."""
    reports = record["lesson_runs"]
    every_cell = [seconds for report in reports for _, seconds in report["cell_seconds"]]
    per_lesson = {}
    for lesson, memory in record["lesson_memory"].items():
        mine = [report for report in reports if report["lesson"] == lesson]
        per_lesson[lesson] = {
            "wall_seconds": record["lesson_seconds"][lesson],
            "student_seconds": _spread([report["seconds"] for report in mine]),
            "server_and_kernel_mib": _spread(list(memory["students"].values())),
            "kernel_peak_mib": _spread([report["kernel_peak_mib"] for report in mine]),
            "kernel_cpu_seconds": _spread([report["kernel_cpu_seconds"] for report in mine]),
            "cell_latency_seconds": _spread([s for report in mine for _, s in report["cell_seconds"]], 3),
            "cells": sum(len(report["cell_seconds"]) for report in mine),
            "hub_total_mib": memory["hub_total"],
            "hub_and_proxy_mib": memory["hub_and_proxy"],
        }
    phases = [record["arrive_memory"], *record["lesson_memory"].values(), record["restart_memory"]]
    per_student = [max(memory["students"][student] for memory in record["lesson_memory"].values())
                   for student in record["server_peak_mib"]]  # fmt: skip
    return {
        "running_kernel_seconds": _spread([arrival["running_kernel_seconds"] for arrival in record["arrivals"]], 2),
        "server_ready_seconds": _spread([arrival["server_ready_seconds"] for arrival in record["arrivals"]], 2),
        "pull_seconds": _spread([arrival["pull_seconds"] for arrival in record["arrivals"]], 2),
        "restart_stop_seconds": _spread([r["stop_seconds"] for r in record["restarts"]], 2),
        "restart_running_kernel_seconds": _spread([r["running_kernel_seconds"] for r in record["restarts"]], 2),
        "cell_latency_seconds": _spread(every_cell, 3),
        "cells": len(every_cell),
        "lessons": per_lesson,
        "student_peak_mib": _spread(per_student),
        "server_peak_mib": _spread(list(record["server_peak_mib"].values())),
        "hub_total_peak_mib": max(memory["hub_total"] for memory in phases),
        "hub_and_proxy_peak_mib": max(memory["hub_and_proxy"] or 0.0 for memory in phases),
        "restart_check": record["restart_check"],
        "seconds": {key: record[key] for key in ("arrive_seconds", "restart_seconds", "repull_wall_seconds")}
        | {"lessons": record["lesson_seconds"]},
    }


def test_a_class_on_jupyterhub(hub: Hub) -> None:
    import psutil

    assert STUDENTS >= 2, "the class needs two students at least: one edits lesson 01, another deletes lesson 07"
    began = time.monotonic()
    record: dict[str, Any] = {
        "students": STUDENTS,
        "lessons": list(LESSONS),
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 1024**3, 1),
        "load_average_at_start": [round(load, 2) for load in os.getloadavg()],
    }
    students = [f"student{number}" for number in range(1, STUDENTS + 1)]
    hub.api("POST", "/hub/api/users", {"usernames": students})
    sampler = Sampler(hub.process.pid)
    sampler.thread.start()
    try:
        _a_class(hub, students, sampler, record)
    finally:
        sampler.stopping.set()
        sampler.thread.join()
        record["load_average_at_end"] = [round(load, 2) for load in os.getloadavg()]
        record["test_seconds"] = round(time.monotonic() - began, 1)
        if "summary" in record:
            print("\n" + json.dumps(record["summary"], indent=1))
        if os.environ.get("CLASSROOM_MEMORY_JSON"):
            written = Path(os.environ["CLASSROOM_MEMORY_JSON"])
            written.parent.mkdir(parents=True, exist_ok=True)
            written.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def _a_class(hub: Hub, students: list[str], sampler: Sampler, record: dict[str, Any]) -> None:
    import psutil

    # Everyone arrives at once: a server, a kernel that answers, then the lessons through the link.
    async def arrive(student: str) -> dict[str, Any]:
        arrival = await _start_server(hub, student)
        arrival["pull_seconds"] = await _open_link(hub, student)
        return arrival

    started = time.monotonic()
    arrivals = _together(students, arrive)
    record["arrive_seconds"] = round(time.monotonic() - started, 1)
    record["arrivals"] = arrivals
    record["arrive_memory"] = sampler.peaks()
    servers = {arrival["student"]: arrival["server_pid"] for arrival in arrivals}
    started_processes = [(a["server_pid"], a["server_created"]) for a in arrivals]
    started_processes += [(a["kernel_pid"], a["kernel_created"]) for a in arrivals]
    for student in students:
        for lesson in LESSONS:
            assert (hub.home(student) / TARGET / "notebooks" / f"{lesson}.ipynb").is_file(), (student, lesson)

    # Every student runs each lesson, all at the same time.
    reports: list[dict[str, Any]] = []
    seconds: dict[str, float] = {}
    memory: dict[str, dict[str, Any]] = {}
    for lesson in LESSONS:
        sampler.reset(servers)
        started = time.monotonic()

        async def run(student: str, lesson: str = lesson) -> dict[str, Any]:
            return await _run_lesson(hub, student, lesson)

        ran = _together(students, run)
        seconds[lesson], memory[lesson] = round(time.monotonic() - started, 1), sampler.peaks()
        for report in ran:
            report["sampled_peak_mib"] = memory[lesson]["students"].get(report["student"], 0.0)
        reports.extend(ran)
        started_processes += [(report["kernel_pid"], report["kernel_created"]) for report in ran]
    server_peaks = {student: round(_high_water_mib(pid), 1) for student, pid in servers.items()}
    record["lesson_runs"] = reports
    record["lesson_seconds"], record["lesson_memory"] = seconds, memory
    record["server_peak_mib"] = server_peaks
    for report in reports:
        where = f"{report['student']}, {report['lesson']}"
        assert not report["problems"], f"{where}: {report['problems']}"
        assert report["checks"] > 0 and len(report["verdicts"]) == report["checks"], f"{where}: {report['verdicts']}"
        assert all("] correct:" in verdict for verdict in report["verdicts"]), f"{where}: {report['verdicts']}"
        assert report["sampled_peak_mib"] > 0

    # Everyone types into the first exercise of each lesson and saves; one student also answers in
    # lesson 01 (which the instructor updates below), another deletes lesson 07.
    typed: dict[tuple[str, str], tuple[str, bytes]] = {}
    for student in students:
        for lesson in LESSONS:
            text = f"# {student}'s own try at {lesson}\nanswer = 'kept across restarts and pulls'"
            typed[student, lesson] = (text, _type_and_save(hub, student, lesson, text))
    edit = "answer_1 = 'my own try, kept across updates'"
    typed[students[0], "01_one_head"] = (edit, _type_and_save(hub, students[0], "01_one_head", edit))
    deleted = f"{TARGET}/notebooks/07_latent_attention.ipynb"
    hub.api("DELETE", f"/user/{students[1]}/api/contents/{deleted}")
    typed.pop((students[1], "07_latent_attention"), None)
    assert not (hub.home(students[1]) / deleted).exists()

    # Every server stops and starts again (as when idle servers are culled, or the hub restarts them);
    # nothing typed is lost.
    sampler.reset({})

    async def restart(student: str) -> dict[str, Any]:
        asked = time.monotonic()
        await _stop_server(hub, student)
        stopped = round(time.monotonic() - asked, 2)
        return await _start_server(hub, student) | {"stop_seconds": stopped}

    started = time.monotonic()
    restarts = _together(students, restart)
    record["restart_seconds"] = round(time.monotonic() - started, 1)
    record["restarts"] = restarts
    record["restart_memory"] = sampler.peaks()
    for arrival in arrivals:  # the first servers' processes ended: these are new ones
        assert not _running(arrival["server_pid"], arrival["server_created"]), arrival["student"]
    started_processes += [(r["server_pid"], r["server_created"]) for r in restarts]
    started_processes += [(r["kernel_pid"], r["kernel_created"]) for r in restarts]
    for (student, lesson), (text, saved) in typed.items():
        path = hub.home(student) / TARGET / "notebooks" / f"{lesson}.ipynb"
        assert path.read_bytes() == saved, f"{student}'s {lesson} changed when the server restarted"
        assert _served_exercise(hub, student, lesson) == text, f"{student}'s {lesson} is not served as typed"

    # The instructor fixes the title of lesson 01 and the README upstream; every student pulls again.
    work = hub.folder / "instructor"
    _git("clone", "--quiet", str(hub.bare), str(work))
    readme = work / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8") + "\nUpdated for this week's class.\n", encoding="utf-8")
    upstream = work / "notebooks" / "01_one_head.ipynb"
    notebook = json.loads(upstream.read_text(encoding="utf-8"))
    title = "".join(notebook["cells"][0]["source"]).split("\n")
    title[0] += " (updated)"
    notebook["cells"][0]["source"] = [line + "\n" for line in title[:-1]] + [title[-1]]
    upstream.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    _git("-c", "user.name=Instructor", "-c", "user.email=instructor@example.org", "commit", "-qam", "update", cwd=work)
    _git("push", "--quiet", "origin", f"HEAD:{hub.branch}", cwd=work)

    async def pull(student: str) -> float:
        return await _open_link(hub, student)

    started = time.monotonic()
    record["repull_seconds"] = _together(students, pull)
    record["repull_wall_seconds"] = round(time.monotonic() - started, 1)
    for student in students:
        home = hub.home(student) / TARGET
        assert "Updated for this week's class." in (home / "README.md").read_text(encoding="utf-8"), student
        pulled = json.loads((home / "notebooks" / "01_one_head.ipynb").read_text(encoding="utf-8"))
        assert "".join(pulled["cells"][0]["source"]).split("\n")[0].endswith(" (updated)"), student
    for (student, lesson), (text, saved) in typed.items():
        path = hub.home(student) / TARGET / "notebooks" / f"{lesson}.ipynb"
        if lesson == "01_one_head":  # changed upstream too: the pull merges the new title in
            kept = json.loads(path.read_text(encoding="utf-8"))
            assert any("".join(c["source"]) == text for c in kept["cells"]), f"{student}'s edit was lost"
        else:
            assert path.read_bytes() == saved, f"{student}'s {lesson} changed when the lessons were pulled again"
    assert (hub.home(students[1]) / deleted).is_file(), "the deleted lesson did not come back"
    record["restart_check"] = {
        "files_typed": len(typed),
        "kept_after_restart": len(typed),  # each asserted above, byte for byte
        "kept_after_pull": len(typed),
    }
    record["summary"] = _summary(record)

    # Everything stops: the servers through the API, then the hub with its proxy.
    _together(students, lambda student: _stop_server(hub, student))
    children = psutil.Process(hub.process.pid).children(recursive=True)
    _stop_hub(hub)
    assert hub.process.returncode is not None
    deadline = time.monotonic() + 60
    while any(_running(pid, created) for pid, created in started_processes):
        assert time.monotonic() < deadline, "a student's server or kernel is still running"
        time.sleep(0.5)
    assert not [child for child in children if child.is_running() and child.status() != psutil.STATUS_ZOMBIE]
