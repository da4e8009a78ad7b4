"""The control-plane protocol between the head and its executors: small typed msgspec messages.

Every message is one msgpack frame of a tagged struct. Tensors never travel here: a `TensorHandle`
(cluster.dataplane.handle, the data plane's own handle) names where the bytes are (a shared-memory segment, an offset; for a consumer on another host, the
owner's host and data socket) and what they are (dtype, shape). An executor that knows the cluster
secret starts with `Hello`, the head answers `Challenge`, and `Register` carries the proof
(cluster.control.head); a head refuses the others with `Refused`.
The head decodes only these structs, so a garbage or truncated frame fails to decode and is dropped.
A call travels as its typed message (cluster.call.ModelFnCall, built by the caller's runtime, carried
unchanged); its one opaque field, `objects` (the Python callables node packs hand over), flows head ->
executor only: an executor trusts the head it connects to, the head never unpickles executor data.
"""

from __future__ import annotations

import msgspec

from cluster.call import ModelFnCall
from cluster.dataplane.handle import TensorHandle

# executor -> head


class Register(msgspec.Struct, tag=True):
    executor_id: str
    host: str
    pid: int
    device: str
    threads: int
    memory_budget: int
    memory_used: int
    cached_models: list[str]
    shm_prefix: str  # every segment this executor creates starts with it (cleanup on loss)
    warmed: list[str] = []  # ModelFns warmed up before registering (cluster.modelfn.warm_up_all)
    warm_s: float = 0.0  # seconds that took
    host_id: str = ""  # which processes share its memory (cluster.dataplane.remote.host_id)
    ip: str = ""  # the address it reaches the head from
    data_address: str = ""  # its data socket, "" when it serves no other host
    proof: bytes = b""  # HMAC of the head's challenge with the cluster secret (b"": it has none)
    nvshmem: bool = False  # a GPU executor that can join its host's NVSHMEM team (nvshmem4py importable)


class Team(msgspec.Struct, tag=True):
    """Join (or re-form) the host's NVSHMEM team as PE `rank` of `nranks`, with the team's unique id; every
    member gets one at the same time and calls the collective join between invocations. `generation`
    counts the team's formations: tensors in an arena of an older generation are gone. `nranks` 0: the team
    is dissolved (a member is gone), leave it without its collectives and serve from host shared memory."""

    uid: bytes
    rank: int
    nranks: int
    generation: int


class TeamJoined(msgspec.Struct, tag=True):
    """The executor has joined team `generation` (its arena is on the NVSHMEM heap now), or `error`: it
    could not, and serves from host shared memory."""

    generation: int
    error: str = ""


class Hello(msgspec.Struct, tag=True):
    """The first message of an executor that knows a cluster secret: the head answers a `Challenge`."""

    nonce: bytes


class Heartbeat(msgspec.Struct, tag=True):
    queue: int
    memory_used: int
    cached_models: list[str]
    # preloading (cluster.executor.preloader): model key -> [first layers resident, its L_e, its layers]
    prefixes: dict[str, list[int]] = {}


class Done(msgspec.Struct, tag=True):
    dispatch_id: int
    outputs: dict[str, TensorHandle]
    nulls: list[str]  # outputs that were None
    measured_s: float  # CPU time (thread, or process with a torch pool) or device time
    wall_s: float
    load_s: float  # part of the wall time spent making weights resident
    memory_used: int
    cached_models: list[str]
    batch: int = 1  # parts that shared the run; measured_s is this part's share of batch_s
    batch_s: float = 0.0  # measured time of the whole shared run (0.0: the part ran alone)
    # the run's input pulls from other producers: through shared memory, and over TCP (with its bytes
    # and seconds, which measured_s includes: the transfer is charged)
    shm_pulls: int = 0
    tcp_pulls: int = 0
    tcp_bytes: int = 0
    tcp_s: float = 0.0
    layers_loaded: int = 0  # weight layers the run made resident (those it found resident were not)
    device_peak: int = 0  # the executor's CUDA allocator peak so far, bytes (0 on a CPU)


class Failed(msgspec.Struct, tag=True):
    dispatch_id: int
    error: str  # "ExceptionType: message"
    traceback: str
    measured_s: float
    lost_input: bool = False  # an input's producer was gone: the caller re-sends it, the request goes on


class Bye(msgspec.Struct, tag=True):
    reason: str


# head -> executor


class Welcome(msgspec.Struct, tag=True):
    heartbeat_s: float
    files: str = ""  # the head's data socket, which serves its model files to executors that lack them


class Challenge(msgspec.Struct, tag=True):
    """The head's answer to `Hello`: its nonce, and its proof that it knows the secret (b"": it has none)."""

    nonce: bytes
    proof: bytes


class Refused(msgspec.Struct, tag=True):
    """The head does not take this executor (no cluster secret, or a wrong one)."""

    reason: str


class Dispatch(msgspec.Struct, tag=True):
    dispatch_id: int
    fn: str
    model_key: str
    call: ModelFnCall  # the call as the runtime built it (fn, weights, typed params)
    inputs: dict[str, TensorHandle]
    nulls: list[str]  # inputs passed as None
    deadline_s: float


class BatchDispatch(msgspec.Struct, tag=True):
    """Compatible invocations of different requests to run as one batch (cluster.scheduling.batching). Each part
    keeps its own dispatch id, call and inputs, and is answered by its own Done or Failed."""

    parts: list[Dispatch]


class PreloadModel(msgspec.Struct, frozen=True):
    fn: str  # a ModelFn that loads the model
    model_key: str
    call: ModelFnCall  # a call that loads it, as Dispatch.call; only its model is used
    compute_s: float = 0.0  # the head's measured seconds of one run (0: not measured yet)


class Preload(msgspec.Struct, tag=True):
    """The models the head expects, most wanted first (cluster.scheduling.dispatcher.preload_order): the executor
    fills idle memory with the first L_e layers of each in the background (cluster.executor.preloader). Each
    Preload replaces the last."""

    models: list[PreloadModel]


class Abort(msgspec.Struct, tag=True):
    dispatch_id: int
    reason: str


class Reset(msgspec.Struct, tag=True):
    """Sent to a sender the head does not know (e.g. declared lost): register again."""


class Shutdown(msgspec.Struct, tag=True):
    # the head itself is stopping (not scaling this executor in): one that joined from another machine waits
    # for it to come back and joins again (Executor.rejoin)
    head_stopping: bool = False


ToHead = Hello | Register | Heartbeat | Done | Failed | Bye | TeamJoined
ToExecutor = Welcome | Challenge | Refused | Dispatch | BatchDispatch | Preload | Abort | Reset | Shutdown | Team

_encoder = msgspec.msgpack.Encoder()
head_decoder = msgspec.msgpack.Decoder(ToHead)
executor_decoder = msgspec.msgpack.Decoder(ToExecutor)


def encode(msg: msgspec.Struct) -> bytes:
    return _encoder.encode(msg)
