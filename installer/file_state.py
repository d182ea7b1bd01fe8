"""What makes a user's file the same file besides its bytes: inode, hard links, owner, extended attributes."""

from __future__ import annotations

import base64
import os
from pathlib import Path


def xattrs(path: Path) -> dict[str, str]:
    """Extended attributes (ACLs, labels, user.*) by name, values base64; {} where unsupported."""
    if not hasattr(os, "listxattr"):
        return {}
    try:
        names = os.listxattr(path)
    except OSError:
        return {}
    out = {}
    for name in sorted(names):
        try:
            out[name] = base64.b64encode(os.getxattr(path, name)).decode()
        except OSError:
            continue
    return out


def identity(path: Path) -> dict:
    st = os.stat(path)
    return {"inode": [st.st_dev, st.st_ino], "links": st.st_nlink, "owner": [st.st_uid, st.st_gid],
            "xattrs": xattrs(path)}


def differences(before: dict | None, path: Path) -> list[str]:
    """How the file at `path` differs from its recorded identity `before` (empty: the same file)."""
    if not before:
        return []
    now = identity(path)
    diffs = []
    if now["inode"] != before.get("inode"):
        diffs.append(f"a new file (inode {now['inode'][1]}, was {before['inode'][1]})")
    if now["links"] != before.get("links"):
        diffs.append(f"{now['links']} hard link(s) (was {before['links']})")
    if now["owner"] != before.get("owner"):
        diffs.append(f"owner {now['owner'][0]}:{now['owner'][1]} (was {before['owner'][0]}:{before['owner'][1]})")
    if now["xattrs"] != before.get("xattrs"):
        changed = sorted(set(now["xattrs"]) ^ set(before.get("xattrs") or {}) |
                         {k for k in now["xattrs"] if (before.get("xattrs") or {}).get(k, now["xattrs"][k]) != now["xattrs"][k]})
        diffs.append(f"extended attributes ({', '.join(changed)})")
    return diffs
