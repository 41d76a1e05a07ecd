"""What the Python tests under mpirun share: each rank prints every check as it runs ("ok   rank
r/n: what" or "FAIL rank r/n: what"), and exits 1 if any of its checks failed."""
import sys


class Checks:
    """This rank's checks: call it with a condition and what it says; `where()` names the rank."""

    def __init__(self, where):
        self.where = where
        self.count = 0
        self.failures = 0

    def __call__(self, condition, what):
        self.count += 1
        self.failures += 0 if condition else 1
        print(f"{'ok  ' if condition else 'FAIL'} {self.where()}: {what}", flush=True)

    def exit(self):
        sys.exit(1 if self.failures else 0)


def error_text(kind, call):
    """The message of the `kind` error that `call()` raises, or "(no error)"."""
    try:
        call()
    except kind as error:
        return str(error)
    return "(no error)"


def raises(kind, text, call):
    """Whether `call()` raises `kind` with `text` in its message; another message is printed."""
    try:
        call()
    except kind as error:
        if text in str(error):
            return True
        print(f"     (raised {type(error).__name__}: {error})", flush=True)
    return False
