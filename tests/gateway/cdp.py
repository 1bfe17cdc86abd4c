"""A headless Chromium driven over the Chrome DevTools protocol (aiohttp's websocket client; no extra package)."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import pathlib
import shutil
import subprocess
import tempfile

import aiohttp

from lab.wait import wait_until

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--ignore-certificate-errors", "--remote-debugging-port=0", "--window-size=1200,1600")  # fmt: skip


class Chromium:
    def __init__(self):
        self.profile = pathlib.Path(tempfile.mkdtemp(prefix="tf-chromium-"))
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        port_file = self.profile / "DevToolsActivePort"
        wait_until(lambda: port_file.exists() and port_file.read_text().count("\n") >= 1, 30, "chromium DevTools")
        self.port = int(port_file.read_text().split()[0])
        self._ids = itertools.count(1)
        self.session = self.ws = None

    async def open(self):
        self.session = aiohttp.ClientSession()
        async with self.session.get(f"http://127.0.0.1:{self.port}/json/list") as resp:
            page = next(t for t in await resp.json() if t["type"] == "page")
        self.ws = await self.session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        await self.call("Page.enable")
        return self

    async def call(self, method, **params):
        ident = next(self._ids)
        await self.ws.send_str(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads((await self.ws.receive()).data)
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    async def evaluate(self, expression):
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result["result"].get("value")

    async def navigate(self, url):
        await self.call("Page.navigate", url=url)
        await self.settle()

    async def settle(self):
        """Wait until the page (after a navigation or a form submit) has loaded."""
        for _attempt in range(200):
            await asyncio.sleep(0.05)
            if await self.evaluate("document.readyState") == "complete":
                return
        raise TimeoutError("page did not load")

    async def submit(self, expression):
        """Run JS that submits a form, then wait for the next page."""
        before = await self.evaluate("performance.timeOrigin")
        await self.evaluate(expression)
        for _attempt in range(200):
            await asyncio.sleep(0.05)
            if await self.evaluate("performance.timeOrigin") != before:
                break
        await self.settle()

    async def screenshot(self, path: pathlib.Path):
        data = (await self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True))["data"]
        path.write_bytes(base64.b64decode(data))

    async def cookies(self):
        return (await self.call("Network.getAllCookies"))["cookies"]

    async def close(self):
        if self.session:
            await self.session.close()
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)
