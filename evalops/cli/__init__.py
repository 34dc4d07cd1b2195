"""The typer CLI: parse options, call one service, print the result."""
