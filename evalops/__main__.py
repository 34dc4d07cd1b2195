from evalops.cli.main import run

run()
