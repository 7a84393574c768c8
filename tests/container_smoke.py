"""`make test-container`: the Dockerfile built with podman and run, and the demo model's tool call sent through it.

No registry pulls (this network reaches only package registries): the base image is a Debian bookworm made here
with debootstrap from Debian's packages and imported into podman; the wheels come from PyPI through pip on this
machine, into a directory the build mounts, so the build itself runs without a network. Needs root (debootstrap),
podman and debootstrap (Debian's packages). Standard library only: it runs apart from the test environment.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "container"  # build/ is in .dockerignore: the 400 MB root file system stays out of context
BASE = "localhost/toolproxy-base:bookworm"
IMAGE = "localhost/toolproxy:test"
MIRROR = os.environ.get("DEBIAN_MIRROR", "http://deb.debian.org/debian")
PACKAGES = "python3,python3-venv,git,ca-certificates"
KEY = "sk-container-test"
# Where podman's defaults cannot start a container (crun on a host whose cgroups are half v1, half v2; rlimits
# that the host does not let a container raise), the runtime and limits tried next.
# Each is (podman's global options, the options of `build` and `run`).
FALLBACK = (("--runtime", "runc"), ("--ulimit", "nofile=8192:8192", "--ulimit", "nproc=4096:4096"))
Options = tuple[tuple[str, ...], tuple[str, ...]]
READY_SECONDS = 120


def step(text: str) -> None:
    print(f"test-container: {text}", flush=True)


def run(*command: str, **options: object) -> str:
    result = subprocess.run(command, capture_output=True, text=True, **options)  # type: ignore[call-overload]
    if result.returncode != 0:
        raise SystemExit(f"test-container: `{' '.join(command)}` failed ({result.returncode}):\n"
                         f"{(result.stdout + result.stderr)[-4000:]}")
    return str(result.stdout)


def make_base() -> None:
    """The Debian base, once: `podman image rm localhost/toolproxy-base:bookworm` makes it again."""
    if subprocess.run(["podman", "image", "exists", BASE]).returncode == 0:
        step(f"base image {BASE} exists")
        return
    rootfs = WORK / "rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    step(f"debootstrap bookworm from {MIRROR} (minbase + {PACKAGES})")
    run("debootstrap", "--variant=minbase", f"--include={PACKAGES}", "bookworm", str(rootfs), MIRROR, timeout=1800)
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    run("podman", "import", "--change", "CMD [\"/bin/bash\"]", "-", BASE, stdin=tar.stdout, timeout=600)
    tar.wait(60)
    shutil.rmtree(rootfs, ignore_errors=True)
    step(f"base image {BASE} imported")


def podman_options() -> Options:
    """Nothing where podman starts a container as it is; else FALLBACK, with podman's own reason printed."""
    plain = subprocess.run(["podman", "run", "--rm", BASE, "true"], capture_output=True, text=True, timeout=120)
    if plain.returncode == 0:
        return (), ()
    reason = (plain.stderr.strip().splitlines() or ["(no message)"])[-1]
    step(f"podman cannot start a container with its defaults here: {reason}")
    run("podman", *FALLBACK[0], "run", "--rm", *FALLBACK[1], BASE, "true", timeout=120)
    step(f"it can with {' '.join(FALLBACK[0] + FALLBACK[1])}: the build and the run use those")
    return FALLBACK


def download_wheels() -> Path:
    """Every wheel the image installs, for the base's Python (bookworm: 3.11), setuptools for the build too."""
    wheels = WORK / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    # pip takes only the platform tags it is given: every manylinux that bookworm's glibc (2.36) runs.
    platforms = [f"manylinux_2_{minor}_x86_64" for minor in range(17, 37)] + ["manylinux2014_x86_64"]
    run(sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "-d", str(wheels),
        "--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
        *(option for platform in platforms for option in ("--platform", platform)),
        "-r", str(ROOT / "requirements.txt"), "setuptools>=64", "wheel", timeout=1200)
    step(f"{len(list(wheels.glob('*.whl')))} wheels in {wheels.relative_to(ROOT)}")
    return wheels


def build(wheels: Path, options: Options) -> None:
    step(f"podman build {IMAGE} (no network)")
    output = run("podman", *options[0], "build", *options[1], "--network=none", "--format", "docker",
                 "-v", f"{wheels}:/wheels:ro", "--build-arg", f"BASE={BASE}", "--build-arg", "PIP_NO_INDEX=1",
                 "--build-arg", "PIP_FIND_LINKS=/wheels", "-t", IMAGE, ".", cwd=ROOT, timeout=1800)
    versions = [line for line in output.splitlines() if line.startswith("toolproxy ")]
    step(f"built: {versions[-1] if versions else '(no version line)'}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def call(url: str, path: str, body: dict[str, object] | None = None) -> dict[str, object]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{url}{path}", data=data, headers={"Content-Type": "application/json",
                                                                         "Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return dict(json.loads(response.read()))


def wait_healthy(name: str, url: str) -> dict[str, object]:
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        state = run("podman", "inspect", "--format", "{{.State.Status}}", name).strip()
        if state != "running":
            raise SystemExit(f"test-container: the container is {state}:\n{run('podman', 'logs', name)[-4000:]}")
        try:
            return call(url, "/health")
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    raise SystemExit(f"test-container: no answer on {url}/health within {READY_SECONDS} s")


def demo_call(url: str) -> dict[str, object]:
    body = {"model": "any", "messages": [{"role": "user", "content": "read the file README.md"}],
            "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {
                "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]}
    message = call(url, "/v1/chat/completions", body)["choices"][0]["message"]  # type: ignore[index]
    function = dict(message["tool_calls"][0]["function"])
    if function["name"] != "read_file" or json.loads(function["arguments"]) != {"path": "README.md"}:
        raise SystemExit(f"test-container: unexpected answer {message}")
    return function


def serve_and_call(options: Options) -> None:
    port, name = free_port(), f"toolproxy-test-{os.getpid()}"
    url = f"http://127.0.0.1:{port}"
    run("podman", *options[0], "run", *options[1], "-d", "--name", name, "-p", f"127.0.0.1:{port}:8003",
        "-e", f"TOOLPROXY_API_KEYS={KEY}", "-v", f"{name}:/var/lib/toolproxy", IMAGE, timeout=120)
    try:
        health = wait_healthy(name, url)
        step(f"GET /health: {json.dumps(health)}")
        function = demo_call(url)
        step(f"the demo's call came back through the container: {function['name']}({function['arguments']})")
        run("podman", *options[0], "healthcheck", "run", name, timeout=60)
        step("podman healthcheck run: healthy")
        logs = subprocess.run(["podman", "logs", name], capture_output=True, text=True, timeout=60)
        lines = (logs.stdout + logs.stderr).splitlines()
        first = next((index for index, line in enumerate(lines) if " serving http" in line), None)
        if first is None:
            raise SystemExit("test-container: no start-up banner in the container's log:\n" + "\n".join(lines))
        step("the container's start-up banner:\n" + "\n".join(lines[first:first + 7]))
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "10", name], capture_output=True)
        subprocess.run(["podman", "volume", "rm", "-f", name], capture_output=True)


def main() -> int:
    for tool in ("podman", "debootstrap"):
        if shutil.which(tool) is None:
            raise SystemExit(f"test-container: {tool} is not installed (Debian: apt-get install {tool})")
    make_base()
    options = podman_options()
    build(download_wheels(), options)
    serve_and_call(options)
    step("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
