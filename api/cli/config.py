"""Where the command line finds its service and key: flags, environment, or a profile from `login`.

Profiles live in one JSON file, `$ORGDECK_CONFIG` or `$XDG_CONFIG_HOME/orgdeck/config.json`
(`~/.config/orgdeck/config.json`), readable by its owner only (mode 0600), as it holds keys.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

DEFAULT_PROFILE = "default"


@dataclass(frozen=True)
class Profile:
    api_url: str
    api_key: str


def config_path() -> Path:
    explicit = os.environ.get("ORGDECK_CONFIG")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "orgdeck" / "config.json"


def _read() -> dict[str, dict[str, str]]:
    path = config_path()
    if not path.exists():
        return {}
    profiles = json.loads(path.read_text()).get("profiles", {})
    return profiles if isinstance(profiles, dict) else {}


def load_profile(name: str) -> Profile | None:
    entry = _read().get(name)
    if not entry or not entry.get("apiUrl") or not entry.get("apiKey"):
        return None
    return Profile(api_url=entry["apiUrl"], api_key=entry["apiKey"])


def save_profile(name: str, profile: Profile) -> Path:
    """Write the profile (others are kept) atomically, to a file only its owner can read."""
    path = config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    profiles = _read()
    profiles[name] = {"apiUrl": profile.api_url, "apiKey": profile.api_key}
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".config-")  # created 0600
    with os.fdopen(descriptor, "w") as file:
        json.dump({"profiles": profiles}, file, indent=2)
    os.replace(temporary, path)
    return path
