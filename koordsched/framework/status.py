"""Status codes and the Status a plugin returns, with kube-scheduler's meanings."""

from __future__ import annotations

from enum import IntEnum


class Code(IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6

    @property
    def label(self) -> str:
        """The Go name, used in metrics labels and logs."""
        return _LABELS[self]


_LABELS = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


#: Python 3.11's EnumType has a ``__getattr__``, which sends every ``Code.X`` through a slow
#: lookup (~0.15 µs): the hot tests below read the members from module constants instead.
_SUCCESS = Code.SUCCESS
_REJECTED = (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


class Status:
    """A plugin's verdict: a code, the reasons a person reads, and the plugin that said it."""

    __slots__ = ("code", "error", "plugin", "reasons")

    def __init__(
        self,
        code: Code = Code.SUCCESS,
        *reasons: str,
        plugin: str = "",
        error: BaseException | None = None,
    ) -> None:
        self.code = code
        self.reasons: tuple[str, ...] = reasons
        self.plugin = plugin
        self.error = error

    # Constructors read better at call sites than Status(Code.X, ...).
    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE, *reasons, plugin=plugin)

    @classmethod
    def unresolvable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons, plugin=plugin)

    @classmethod
    def from_error(cls, err: BaseException, plugin: str = "") -> Status:
        return cls(Code.ERROR, str(err), plugin=plugin, error=err)

    @property
    def ok(self) -> bool:
        return self.code is _SUCCESS

    @property
    def rejected(self) -> bool:
        """Unschedulable or UnschedulableAndUnresolvable: the pod does not fit, no fault occurred."""
        return self.code in _REJECTED

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        if self.plugin == plugin:
            return self
        return Status(self.code, *self.reasons, plugin=plugin, error=self.error)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return self.code == other.code and self.reasons == other.reasons

    def __hash__(self) -> int:
        return hash((self.code, self.reasons))

    def __repr__(self) -> str:
        who = f" plugin={self.plugin}" if self.plugin else ""
        return f"Status({self.code.label}{who}: {self.message()!r})"


#: Shared success value: plugins return it instead of allocating a new one per call.
SUCCESS = Status()
SKIP = Status(Code.SKIP)


class PluginError(Exception):
    """A plugin returned Error during a cycle: the pod is requeued with backoff, not marked unschedulable."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status
