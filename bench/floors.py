"""Floors the benchmarks share: programs that do a job with no panel code, to divide by."""

# The floor of any Typer CLI's help: a minimal two-command app, no completion options.
TYPER_FLOOR = '''\
import typer

app = typer.Typer(add_completion=False)


@app.command()
def hello(name: str) -> None:
    """Say hello."""
    print(f"hello {name}")


@app.command()
def bye(name: str, loud: bool = False) -> None:
    """Say goodbye."""
    print(f"bye {name}")


if __name__ == "__main__":
    app()
'''
