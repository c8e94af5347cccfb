"""A Modal web endpoint that runs each sandboxflow request in a fresh Modal Sandbox.

sandboxflow's worker calls it with the HTTP recipe:

    worker --backend http --http-url https://<workspace>--sandboxflow-run.modal.run \
        --http-header-file modal-headers.txt

where modal-headers.txt holds a Modal Proxy Auth Token (the endpoint refuses calls without one):

    Modal-Key: wk-...
    Modal-Secret: ws-...

Deploy with `modal deploy app.py`. NOT RUN in sandboxflow's tests (nothing here can reach
Modal): the request and response shapes are checked by backends/httpservice's tests, which feed
request.json to the HTTP recipe's fake service and run runner.py locally on it.

Each request gets its own Sandbox with no network (block_network=True) unless the request asks
for it; the worker's policy decides whether a request may ask. The Sandbox's own lifetime is the
run's timeout plus a margin, so Modal reclaims it even if this function dies, and the function
terminates it after every run. Inside, runner.py writes the input files, runs the code with the
timeout and reports the result; sandboxflow re-applies every limit to what comes back.
"""

import json
import pathlib
import re

import modal

RUNNER = "/opt/sandboxflow/runner.py"

# The image the code runs in: Python and a POSIX shell, plus the runner. Add the packages your
# agents' code may import (.pip_install(...)); the code cannot install any without network.
sandbox_image = modal.Image.debian_slim(python_version="3.12").add_local_file(
    pathlib.Path(__file__).parent / "runner.py", RUNNER
)

# The image of the web endpoint itself.
web_image = modal.Image.debian_slim(python_version="3.12").pip_install("fastapi[standard]")

app = modal.App("sandboxflow", image=web_image)


def timeout_seconds(value) -> float:
    """The request's limits.timeout: nanoseconds as a number, or a Go duration such as "30s"."""
    if isinstance(value, (int, float)):
        return value / 1e9
    units = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * units[u] for n, u in re.findall(r"([0-9.]+)(ns|us|ms|s|m|h)", value))


@app.function(timeout=900)
@modal.fastapi_endpoint(method="POST", label="sandboxflow-run", requires_proxy_auth=True)
def run(request: dict) -> dict:
    """Runs one request (a guard.Checked as JSON) and answers one result (a guard.Result)."""
    timeout = timeout_seconds(request["limits"]["timeout"])
    network = bool(request.get("network", False))
    sb = modal.Sandbox.create(
        app=app,
        image=sandbox_image,
        timeout=int(timeout) + 60,  # Modal reclaims the Sandbox after this, whatever happens
        block_network=not network,  # or a CIDR allowlist (Modal's cidr_allowlist) instead of open egress
        cpu=1.0,
        memory=512,
    )
    try:
        proc = sb.exec("python3", RUNNER, timeout=int(timeout) + 30)
        proc.stdin.write(json.dumps(request).encode())
        proc.stdin.write_eof()
        proc.stdin.drain()
        out = proc.stdout.read()
        proc.wait()
        if proc.returncode != 0:
            # The runner itself failed: no result. sandboxflow reports the non-200 answer as an
            # IntegrationError whose outcome is unknown, and never retries it.
            raise RuntimeError("runner exited %d: %s" % (proc.returncode, proc.stderr.read()[-2000:]))
        return json.loads(out)
    finally:
        sb.terminate()
