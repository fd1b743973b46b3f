"""The README's "Govern a LangChain tool" lines run as printed (URL and key from the test setup)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import URL, Approver, Tenant, approve_all

README = Path(__file__).resolve().parents[3] / "README.md"


def snippet() -> str:
    text = README.read_text()
    section = text.split("## Govern a LangChain tool", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_lines_govern_a_langchain_tool(t2: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    code = snippet()
    assert len([line for line in code.splitlines() if line.strip()]) <= 12
    monkeypatch.setenv("STEWARD_API_KEY", t2.key)
    ns: dict = {}
    exec(compile(code.replace("http://localhost:8080", URL), "README.md", "exec"), ns)  # noqa: S102
    tool, steward = ns["export_contacts"], ns["steward"]
    steward.poll_initial, steward.poll_max, steward.approval_timeout = 0.05, 0.3, 30
    assert tool.invoke({"segment": "q3", "records": 10}) == "exported 10 contacts of q3"
    with Approver(t2, approve_all) as human:
        assert tool.invoke({"segment": "all", "records": 5000}) == "exported 5000 contacts of all"
    assert len(human.decided) == 1
    entries = [e for e in t2.audit(steward.agent_id) if e["action"] == "export_data"]
    assert [e["resource"] for e in entries] == ["crm/all", "crm/q3"]
    assert entries[0]["input"]["approval"]["approval_id"] == human.decided[0]["approval_id"]
    steward.close()
