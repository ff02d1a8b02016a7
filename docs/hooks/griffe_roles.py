"""A griffe extension for the API reference: the docstrings' reST roles (``:class:`X```, ``:func:`~a.b```)
become code spans, which mkdocstrings renders (it does not know Sphinx roles)."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj):`~?([^`]+)`")


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(lambda m: f"``{m.group(1).rsplit('.', 1)[-1]}``", obj.docstring.value)
