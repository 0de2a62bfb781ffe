"""The commands the Real servers page gives a visitor to copy: start a server, send it requests.

Plain strings, so a test can run them as shown against a real `live serve` (tests/test_serve.py).
Each is written in short lines where a shell or Python reads them: a phone wraps a long line
at its hyphens ("--" | "port").
"""

SERVE_CMD = "python -m live serve \\\n    --model tiny --port 8000"


def curl_command(url: str) -> str:
    """A streamed completion from the server at `url`, with curl (server-sent events)."""
    return (
        f"curl -N {url}/v1/completions \\\n"
        "  -H 'Content-Type: application/json' \\\n"
        """  -d '{"prompt": "Once upon a time", "max_tokens": 64, "stream": true}'"""
    )


def shell_howto(url: str, comment: str) -> str:
    """Start the server, then send it a request: the page's first block (`comment` translated)."""
    return f"{SERVE_CMD}\n# {comment}\n\n{curl_command(url)}"


def python_client(url: str) -> str:
    """The same streamed completion with OpenAI's official client."""
    return (
        "from openai import OpenAI\n\n"
        f'client = OpenAI(base_url="{url}/v1", api_key="none")\n'
        "stream = client.completions.create(\n"
        '    model="tiny", prompt="Hello", max_tokens=32, stream=True\n'
        ")\n"
        "for chunk in stream:\n"
        '    print(chunk.choices[0].text, end="", flush=True)'
    )
