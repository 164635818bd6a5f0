"""The README's promises that a test can keep: its Python API example runs and says what the
README says it says (issue 32, part 9)."""

import re
from collections import Counter
from pathlib import Path

import matplotlib.pyplot as plt

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_api_example_runs_and_its_verdicts_are_as_written():
    text = README.read_text()
    section = text.split("## Python API", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    plt.close("all")
    claims = namespace["result"].claims()
    said = re.search(r"Here (\d) claims hold, (\d) is a bound and (\d) fails", section)
    assert said is not None
    holds, bound, fails = map(int, said.groups())
    assert Counter(claims["verdict"]) == {"holds": holds, "bound": bound, "fails": fails}
    failing = claims[claims["verdict"] == "fails"]
    assert failing["claim"].str.contains("eq \\(30\\)").all()
    assert failing["detail"].str.contains("errata").all()
