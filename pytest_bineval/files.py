"""Atomic text writes: every file bineval writes for people or later runs (the JSON report, which is also a
baseline; the HTML page; pinned checklists; a rewritten prompt and its history) goes through
:func:`write_text_atomic`, so a reader or a crash never sees half a file."""
from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8, newlines as given) to a temporary file in the same directory, flush it to disk
    and rename it over ``path``; on any failure the temporary file is removed and an existing ``path`` is left
    as it was. Missing parent directories are created.

    Permissions: a new file gets the usual mode (0666 less the umask, e.g. 0644: these are artifacts to share,
    not private temp files); a file that already exists keeps its own mode. Returns the path written."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        keep: int | None = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        keep = None
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        # "x" creates with mode 0666 & ~umask (tempfile.mkstemp would make it 0600)
        with open(tmp, "x", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if keep is not None:
            os.chmod(tmp, keep)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target
