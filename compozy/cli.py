"""The `compozy` console script: the same commands as `python manage.py`, from any directory."""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "compozy.settings")
    from django.core.management import execute_from_command_line

    args = list(sys.argv[1:] if argv is None else argv)
    execute_from_command_line(["compozy", *args])


if __name__ == "__main__":
    main()
