"""The Zero to JupyterHub values file (classroom/z2jh/values.yaml) against the chart's own schema, merged over the
chart's defaults as Helm does (both vendored beside it), and against the local hub's settings it stands for."""
from pathlib import Path

import jsonschema
import pytest
import yaml

from course.grading.notebook_spec import REPO

HERE = REPO / "classroom" / "z2jh"


def _schema():
    return yaml.safe_load((HERE / "values.schema.yaml").read_text())


def _values():
    return yaml.safe_load((HERE / "values.yaml").read_text())


def _merged(over, base):
    """Helm's merge of a values file over the chart's defaults: maps merge key by key, anything else replaces."""
    if isinstance(over, dict) and isinstance(base, dict):
        return {k: _merged(over[k], base[k]) if k in over and k in base else over.get(k, base.get(k))
                for k in base.keys() | over.keys()}
    return over


def _errors(values):
    base = yaml.safe_load((HERE / "chart-defaults.yaml").read_text())
    return [e.message for e in jsonschema.Draft7Validator(_schema()).iter_errors(_merged(values, base))]


def test_values_match_the_chart_schema():
    assert _errors(_values()) == []


@pytest.mark.parametrize("edit, message", [
    (lambda v: v["singleuser"].update(defaultURL="/lab"), "Additional properties are not allowed ('defaultURL'"),
    (lambda v: v["singleuser"]["storage"].update(type="floppy"), "'floppy' is not one of"),
    (lambda v: v["hub"].update(confg={}), "Additional properties are not allowed ('confg'"),
])
def test_the_schema_rejects_a_wrong_key(edit, message):
    values = _values()
    edit(values)
    errors = _errors(values)
    assert any(message in e for e in errors), errors


def test_same_class_as_the_local_hub():
    text = (REPO / "classroom" / "jupyterhub_config.py").read_text()
    v = _values()
    assert 'INSTRUCTOR = "instructor"' in text and v["hub"]["config"]["Authenticator"]["admin_users"] == ["instructor"]
    assert "student1,student2" in text
    assert v["hub"]["config"]["Authenticator"]["allowed_users"] == ["instructor", "student1", "student2"]
    assert v["singleuser"]["defaultUrl"] == "/lab" and 'c.Spawner.default_url = "/lab"' in text
    mount = v["singleuser"]["storage"]["extraVolumeMounts"][0]["mountPath"]
    assert v["singleuser"]["extraEnv"]["NBGRADER_EXCHANGE"] == mount
