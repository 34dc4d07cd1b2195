"""The options every signed act takes, and printing an act to sign (docs/authority.md)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from evalops.services.authority.acts import Signing

SignWithOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--sign-with",
        metavar="KEY",
        help="Sign the act with this SSH key (runs `ssh-keygen -Y sign -n evalops -f KEY`; "
        "ssh-agent and hardware keys work). Repeatable.",
    ),
]
PrintActOption = Annotated[
    bool,
    typer.Option(
        "--print-act",
        help="Print the act to sign (canonical JSON) and store nothing; sign it with "
        "`ssh-keygen -Y sign -n evalops -f KEY act.json`, then pass --act and --signature.",
    ),
]
ActOption = Annotated[
    Path | None,
    typer.Option(
        "--act",
        metavar="FILE",
        help="An act printed by --print-act (with the same options) and signed elsewhere.",
    ),
]
SignatureOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--signature",
        metavar="FILE",
        help="An SSH signature of the --act file (`act.json.sig`). Repeatable, for thresholds.",
    ),
]


def signing_of(
    sign_with: list[Path] | None,
    print_act: bool,
    act: Path | None,
    signature: list[Path] | None,
) -> Signing:
    from evalops.services.authority.acts import Signing

    signing = Signing(
        print_act=print_act,
        keys=tuple(sign_with or ()),
        act_file=act,
        signature_files=tuple(signature or ()),
    )
    signing.check()
    return signing


@contextmanager
def printing_act() -> Iterator[None]:
    """`--print-act`: the act goes to stdout byte for byte (exit 0, nothing stored)."""
    from evalops.services.authority.acts import ActToSign

    try:
        yield
    except ActToSign as act:
        sys.stdout.write(act.data.decode("utf-8"))
        sys.stdout.flush()
        raise typer.Exit(0) from None
