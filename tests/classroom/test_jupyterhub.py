"""A real JupyterHub on 127.0.0.1 with several students, as an instructor would run a class.

One test, in the order a class lives it: the hub starts (DummyAuthenticator, SimpleLocalProcessSpawner,
the Python configurable-http-proxy, random free ports, a random service token); `STUDENTS` students
are created and their servers started through the REST API; each gets the lessons through the
nbgitpuller API behind an nbgitpuller link, from a local bare clone of this repository; every
student then runs each lesson of `LESSONS` through its own kernel, all
students at the same time (widget cells are driven by the lessons' own "drive it" cells, from code),
while their memory is sampled; every exercise's check must say "correct" after its solution ran and
every ordinary cell must print what the committed notebook stores. Then a student saves an answer
and another deletes a lesson, the instructor pushes an update to the same notebook, a second pull
merges it in, keeps the answer and restores the deleted lesson, and everything is stopped.

The measured memory (per student and lesson: the server plus that lesson's kernel) is printed and,
with ``CLASSROOM_MEMORY_JSON=path``, written as JSON: the README's sizing table comes from it.
``CLASSROOM_STUDENTS`` and ``CLASSROOM_HUB_LESSONS`` (comma-separated lesson names) change the class.
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
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from classroom_support import BIN, REPO, require, tool_env

STUDENTS = int(os.environ.get("CLASSROOM_STUDENTS", "4"))
LESSONS = tuple(os.environ.get("CLASSROOM_HUB_LESSONS", "05_inspecting_heads,09_heads_at_work").split(","))
TARGET = "several-heads"  # the folder nbgitpuller clones into, in each student's home
START_SECONDS = 180.0
CELL_SECONDS = 600.0
MIB = 1024.0 * 1024.0
# nbval's sanitize rules (tests/nbval_sanitize.cfg), applied to both sides of an output comparison.
SANITIZE = [
    (re.compile(r"at 0x[0-9a-fA-F]+"), "at 0x<address>"),
    (re.compile(r"/tmp/ipykernel_\d+/\d+\.py"), "<ipykernel>"),
]


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

    def api(self, method: str, path: str, body: Any = None, timeout: float = 60) -> Any:
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
        with urllib.request.urlopen(request, timeout=300) as response:
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
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
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


@dataclass
class Memory:
    """Sampled resident memory of one student's server plus its kernels (bytes), and its peak."""

    server_pid: int
    peak: int = 0
    kernels: set[int] = field(default_factory=set)

    def sample(self) -> None:
        import psutil

        try:
            server = psutil.Process(self.server_pid)
            processes = [server, *server.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        total = 0
        for process in processes:
            try:
                total += process.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        self.peak = max(self.peak, total)


def _high_water_mib(pid: int) -> float:
    """The kernel's own peak resident memory (VmHWM), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmHWM for {pid}")


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


async def _run_lesson(hub: Hub, student: str, lesson: str, memory: Memory) -> dict[str, Any]:
    """Run one lesson through the student's own kernel, over the server's websocket; return a report."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    path = f"{TARGET}/notebooks/{lesson}.ipynb"
    notebook = json.loads((hub.home(student) / path).read_text(encoding="utf-8"))
    session = await asyncio.to_thread(
        hub.api, "POST", f"/user/{student}/api/sessions",
        {"path": path, "type": "notebook", "name": f"{lesson}.ipynb", "kernel": {"name": "python3"}},
    )  # fmt: skip
    kernel = session["kernel"]["id"]
    ws_url = hub.url.replace("http", "ws", 1) + f"/user/{student}/api/kernels/{kernel}/channels"
    connection = await websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {hub.token}"}))
    client_session = uuid.uuid4().hex

    async def execute(code: str) -> list[dict[str, Any]]:
        msg_id = uuid.uuid4().hex
        header = {"msg_id": msg_id, "username": student, "session": client_session, "msg_type": "execute_request",
                  "version": "5.3", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
        content = {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                   "allow_stdin": False, "stop_on_error": True}  # fmt: skip
        message = {"header": header, "parent_header": {}, "metadata": {}, "content": content, "channel": "shell"}
        await connection.write_message(json.dumps(message))
        outputs: list[dict[str, Any]] = []
        idle = replied = False
        while not (idle and replied):
            raw = await asyncio.wait_for(connection.read_message(), timeout=CELL_SECONDS)
            assert raw is not None, f"{student}: the kernel's websocket closed while running {lesson}"
            reply = json.loads(_message_json(raw))
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = reply["header"]["msg_type"]
            if reply.get("channel") == "shell" and kind == "execute_reply":
                replied = True
            elif kind == "status" and reply["content"].get("execution_state") == "idle":
                idle = True
            elif kind in ("stream", "execute_result", "display_data", "error"):
                outputs.append({"output_type": kind, **reply["content"]})
        return outputs

    started = time.monotonic()
    pid_output = await execute("import os\nprint(os.getpid())")
    kernel_pid = int(_printed(pid_output).strip())
    memory.kernels.add(kernel_pid)
    problems: list[str] = []
    verdicts: list[str] = []
    for index, phase in _run_order(notebook["cells"]):
        cell = notebook["cells"][index]
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        outputs = await execute(source)
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
    kernel_peak = _high_water_mib(kernel_pid)
    await asyncio.to_thread(hub.api, "DELETE", f"/user/{student}/api/sessions/{session['id']}")
    connection.close()
    return {
        "student": student,
        "lesson": lesson,
        "seconds": round(time.monotonic() - started, 1),
        "kernel_peak_mib": round(kernel_peak, 1),
        "problems": problems,
        "checks": sum("check" in c.get("metadata", {}).get("tags", []) for c in notebook["cells"]),
        "verdicts": verdicts,
    }


def _server_pid(hub: Hub, student: str) -> int:
    model = hub.api("GET", f"/hub/api/users/{student}")
    return int(model["servers"][""]["state"]["pid"])


def _start_servers(hub: Hub, students: list[str]) -> None:
    hub.api("POST", "/hub/api/users", {"usernames": students})
    for student in students:
        hub.api("POST", f"/hub/api/users/{student}/server")
    deadline = time.monotonic() + START_SECONDS
    for student in students:
        while not hub.api("GET", f"/hub/api/users/{student}")["servers"].get("", {}).get("ready"):
            assert time.monotonic() < deadline, f"{student}'s server did not start:\n{hub.log.read_text()[-3000:]}"
            time.sleep(0.5)


def _edit_exercise(hub: Hub, student: str, lesson: str, text: str) -> None:
    """The student types into the first exercise cell and saves, through the server's contents API."""
    path = f"/user/{student}/api/contents/{TARGET}/notebooks/{lesson}.ipynb"
    model = hub.api("GET", path)
    cell = next(c for c in model["content"]["cells"] if "exercise" in c["metadata"].get("tags", []))
    cell["source"] = text
    hub.api("PUT", path, {"type": "notebook", "format": "json", "content": model["content"]})


def test_a_class_on_jupyterhub(hub: Hub) -> None:
    import psutil

    students = [f"student{number}" for number in range(1, STUDENTS + 1)]
    _start_servers(hub, students)
    servers = {student: _server_pid(hub, student) for student in students}

    # The link an instructor hands out, opened by each student: nbgitpuller's page, then its pull.
    for student in students:
        query = urllib.parse.urlencode({"repo": hub.bare.as_uri(), "branch": hub.branch, "targetpath": TARGET,
                                        "urlpath": f"lab/tree/{TARGET}/notebooks/{LESSONS[0]}.ipynb"})  # fmt: skip
        request = urllib.request.Request(f"{hub.url}/user/{student}/git-pull?{query}")
        request.add_header("Authorization", f"token {hub.token}")
        with urllib.request.urlopen(request, timeout=60) as page:
            assert page.status == 200 and b"nbgitpuller" in page.read().lower()
        events = hub.pull(student)
        assert events and events[-1].get("phase") == "finished", f"{student}: {events[-3:]}"
        for lesson in LESSONS:
            assert (hub.home(student) / TARGET / "notebooks" / f"{lesson}.ipynb").is_file()

    memories = {student: Memory(servers[student]) for student in students}
    results: list[dict[str, Any]] = []
    per_lesson: dict[str, dict[str, float]] = {}
    for lesson in LESSONS:
        for memory in memories.values():
            memory.peak = 0
        stop = threading.Event()

        def sample(stop: threading.Event = stop) -> None:
            while not stop.is_set():
                for memory in memories.values():
                    memory.sample()
                stop.wait(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()

        async def everyone(lesson: str = lesson) -> list[dict[str, Any]]:
            return list(await asyncio.gather(*(_run_lesson(hub, s, lesson, memories[s]) for s in students)))

        try:
            reports = asyncio.run(everyone())
        finally:
            stop.set()
            sampler.join()
        for report in reports:
            report["sampled_peak_mib"] = round(memories[report["student"]].peak / MIB, 1)
        results.extend(reports)
        per_lesson[lesson] = {r["student"]: r["sampled_peak_mib"] for r in reports}

    for student in students:
        results.append({"student": student, "server_peak_mib": round(_high_water_mib(servers[student]), 1)})
    summary = json.dumps(results, indent=1)
    print("\nper student and lesson (server + kernel, sampled every 0.2 s):", json.dumps(per_lesson, indent=1))
    print(summary)
    if os.environ.get("CLASSROOM_MEMORY_JSON"):
        Path(os.environ["CLASSROOM_MEMORY_JSON"]).write_text(summary, encoding="utf-8")

    for report in results:
        if "lesson" not in report:
            continue
        where = f"{report['student']}, {report['lesson']}"
        assert not report["problems"], f"{where}: {report['problems']}"
        assert report["checks"] > 0 and len(report["verdicts"]) == report["checks"], f"{where}: {report['verdicts']}"
        assert all("] correct:" in verdict for verdict in report["verdicts"]), f"{where}: {report['verdicts']}"
        assert report["sampled_peak_mib"] > 0

    # One student saves an answer in lesson 01, another deletes lesson 07; the instructor fixes the
    # title of lesson 01 and the README upstream. A second pull brings both fixes in, keeps the saved
    # answer beside the new title, and brings the deleted lesson back.
    edit = "answer_1 = 'my own try, kept across updates'"
    _edit_exercise(hub, students[0], "01_one_head", edit)
    deleted = f"{TARGET}/notebooks/07_latent_attention.ipynb"
    hub.api("DELETE", f"/user/{students[1]}/api/contents/{deleted}")
    assert not (hub.home(students[1]) / deleted).exists()
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
    for student in students[:2]:
        events = hub.pull(student)
        assert events and events[-1].get("phase") == "finished", events[-3:]
        home = hub.home(student) / TARGET
        assert "Updated for this week's class." in (home / "README.md").read_text(encoding="utf-8")
        pulled = json.loads((home / "notebooks" / "01_one_head.ipynb").read_text(encoding="utf-8"))
        assert "".join(pulled["cells"][0]["source"]).split("\n")[0].endswith(" (updated)"), student
    kept = json.loads((hub.home(students[0]) / TARGET / "notebooks" / "01_one_head.ipynb").read_text(encoding="utf-8"))
    assert any("".join(c["source"]) == edit for c in kept["cells"]), "the student's edit was lost"
    assert (hub.home(students[1]) / deleted).is_file(), "the deleted lesson did not come back"

    # Everything stops: the servers through the API, then the hub with its proxy.
    for student in students:
        hub.api("DELETE", f"/hub/api/users/{student}/server")
    started = [*servers.values(), *(pid for memory in memories.values() for pid in memory.kernels)]
    children = psutil.Process(hub.process.pid).children(recursive=True)
    _stop_hub(hub)
    assert hub.process.returncode is not None
    deadline = time.monotonic() + 60
    while any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in started):
        assert time.monotonic() < deadline, "a student's server or kernel is still running"
        time.sleep(0.5)
    assert not [child for child in children if child.is_running() and child.status() != psutil.STATUS_ZOMBIE]

