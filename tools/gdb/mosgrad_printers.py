# gdb pretty-printers for mosgrad: `print t` on an mg::Tensor, mg::TensorImpl (or a pointer or
# shared_ptr to one), mg::Node or mg::Storage shows what a student wants to see while stepping
# through a backward pass, on one line:
#
#   Tensor shape=[3] strides=[1] device=cpu requires_grad=true grad_fn=add values=[5, 12, 21]
#   Node #3 op=mul out_shape=[3] inputs=2 {[3] requires_grad=true grad_fn=add#2, [3] ...}
#
# Load them with `gdb -q -x tools/gdb/gdbinit --args build/debug/mosgrad ...` from the repository
# root, or `source tools/gdb/mosgrad_printers.py` inside gdb (docs/gdb.md, "Pretty-printers").
#
# Everything is read from memory through gdb's Value API; nothing calls into the program. So the
# printers work on core files, in frames where a call would be unsafe (inside the allocator, on a
# signal), and in `bt` lines; `call mg_print(&t)` still prints the whole tensor when a call is
# fine. Numbers on a GPU are not read (a device pointer is not host memory): `values=<on cuda>`.
#
# The layouts read are GCC's libstdc++ (std::shared_ptr::_M_ptr, std::vector::_M_impl,
# std::string::_M_dataplus), which every mosgrad build uses. mg::Shape is only a typedef of
# std::vector<int64_t>, so it gets no printer of its own (that would change how every
# vector<int64_t> prints); Tensor, TensorImpl and Node print their shapes as [544,10000].

import gdb
import gdb.printing

MAX_VALUES = 6  # first values shown, in row-major order
MAX_RANK = 16  # more than this is garbage (an uninitialised tensor), not a shape
MAX_INPUTS = 8  # a Node's inputs listed one by one; concat can have hundreds


class _Unreadable(Exception):
    """The value does not look like a live mosgrad object (garbage, freed, half-built)."""


def _pointer(shared_ptr):
    """The raw pointer held by a std::shared_ptr (0 when empty)."""
    return shared_ptr["_M_ptr"]


def _vector(vec):
    """The elements of a std::vector, as gdb Values."""
    start = vec["_M_impl"]["_M_start"]
    finish = vec["_M_impl"]["_M_finish"]
    if int(start) == 0:
        return []
    n = int(finish - start)
    if n < 0 or n > 1 << 20:
        raise _Unreadable("vector of %d elements" % n)
    return [(start + i).dereference() for i in range(n)]


def _ints(vec, limit=MAX_RANK):
    values = _vector(vec)
    if len(values) > limit:
        raise _Unreadable("%d dimensions" % len(values))
    return [int(v) for v in values]


def _string(s):
    length = int(s["_M_string_length"])
    if length == 0:
        return ""
    if length < 0 or length > 4096:
        raise _Unreadable("string of %d chars" % length)
    return s["_M_dataplus"]["_M_p"].string(length=length)


def _shape_str(shape):
    """mg::shape_str's form: [544,10000], [] for a scalar."""
    return "[" + ",".join(str(d) for d in shape) + "]"


def _device(storage):
    """'cpu' or 'cuda', from mg::Device (the enumerator's name, lower-cased)."""
    text = str(storage["device"])  # "mg::Device::CPU"
    return text.split("::")[-1].lower()


def _number(x):
    """Like debug_string's %.4g, one digit more: enough to tell -9.2103 from -9.2104."""
    return "%.5g" % x


def _values(impl, shape, strides, data):
    """The first MAX_VALUES elements in row-major order, following strides (views included)."""
    numel = 1
    for d in shape:
        numel *= d
    if not shape:
        return _number(float((data + int(impl["offset"])).dereference()))
    out = []
    index = [0] * len(shape)
    for _ in range(min(numel, MAX_VALUES)):
        at = int(impl["offset"]) + sum(i * s for i, s in zip(index, strides))
        out.append(_number(float((data + at).dereference())))
        for d in reversed(range(len(shape))):  # next index, last dimension fastest
            index[d] += 1
            if index[d] < shape[d]:
                break
            index[d] = 0
    if numel > MAX_VALUES:
        out.append("...")
    return "[" + ", ".join(out) + "]"


def _grad_fn_name(impl):
    node = _pointer(impl["grad_fn"])
    return "none" if int(node) == 0 else _string(node.dereference()["op"])


def _impl_summary(impl):
    """Everything after the 'Tensor ' / 'TensorImpl ' prefix, from a TensorImpl value."""
    shape = _ints(impl["shape"])
    strides = _ints(impl["strides"])
    parts = ["shape=" + _shape_str(shape), "strides=" + _shape_str(strides)]
    offset = int(impl["offset"])
    if offset != 0:
        parts.append("offset=%d" % offset)
    storage = _pointer(impl["storage"])
    device = "?" if int(storage) == 0 else _device(storage.dereference())
    parts.append("device=" + device)
    parts.append("requires_grad=" + ("true" if bool(impl["requires_grad"]) else "false"))
    parts.append("grad_fn=" + _grad_fn_name(impl))
    name = _string(impl["name"])
    if name:
        parts.append("name=" + name)
    if int(_pointer(impl["grad"])) != 0:
        parts.append("grad=" + _shape_str(_ints(_pointer(impl["grad"]).dereference()["shape"])))
    if int(storage) == 0:
        parts.append("values=<no storage>")
    elif device != "cpu":
        parts.append("values=<on %s>" % device)
    elif len(shape) != len(strides):
        raise _Unreadable("%d sizes but %d strides" % (len(shape), len(strides)))
    else:
        data = storage.dereference()["data"]
        try:
            parts.append("values=" + _values(impl, shape, strides, data))
        except gdb.MemoryError:  # e.g. a core file without that memory
            parts.append("values=<unreadable at %s>" % data)
    return " ".join(parts)


def _safely(kind, build):
    """build()'s text, or a one-line reason instead of a Python traceback."""
    try:
        return build()
    except (gdb.error, gdb.MemoryError, _Unreadable) as e:  # garbage, freed or not yet built
        return "%s <unreadable: %s>" % (kind, e)
    except Exception as e:  # a bug here: say so, but keep `bt` and `info locals` going
        return "%s <printer error in mosgrad_printers.py: %s: %s>" % (kind, type(e).__name__, e)


class TensorPrinter:
    """mg::Tensor: a handle (shared_ptr<TensorImpl>); undefined when the pointer is null."""

    def __init__(self, val):
        self.val = val

    def to_string(self):
        def build():
            impl = _pointer(self.val["impl_"])
            if int(impl) == 0:
                return "Tensor(undefined)"
            return "Tensor " + _impl_summary(impl.dereference())

        return _safely("Tensor", build)


class TensorImplPrinter:
    def __init__(self, val):
        self.val = val

    def to_string(self):
        return _safely("TensorImpl", lambda: "TensorImpl " + _impl_summary(self.val))


def _input_summary(tensor):
    """'[3] requires_grad=true grad_fn=add#2': the producing node's id, as in mg_print_graph."""
    impl = _pointer(tensor["impl_"])
    if int(impl) == 0:
        return "undefined"
    impl = impl.dereference()
    text = "%s requires_grad=%s grad_fn=" % (
        _shape_str(_ints(impl["shape"])),
        "true" if bool(impl["requires_grad"]) else "false",
    )
    node = _pointer(impl["grad_fn"])
    if int(node) == 0:
        text += "none"
    else:
        node = node.dereference()
        text += "%s#%d" % (_string(node["op"]), int(node["id"]))
    name = _string(impl["name"])  # parameters are named: which weight this op read
    return text + (" name=" + name if name else "")


class NodePrinter:
    """mg::Node: the op, its id (`condition N node.id == K`), output shape and inputs."""

    def __init__(self, val):
        self.val = val

    def to_string(self):
        def build():
            node = self.val
            inputs = _vector(node["inputs"])
            parts = [
                "Node #%d op=%s" % (int(node["id"]), _string(node["op"])),
                "out_shape=" + _shape_str(_ints(node["out_shape"])),
            ]
            if int(node["backward"]["call_"]) == 0:
                parts.append("backward=freed")  # a backward pass has already run through it
            listed = [_input_summary(t) for t in inputs[:MAX_INPUTS]]
            if len(inputs) > MAX_INPUTS:
                listed.append("... %d more" % (len(inputs) - MAX_INPUTS))
            parts.append("inputs=%d {%s}" % (len(inputs), ", ".join(listed)))
            return " ".join(parts)

        return _safely("Node", build)


class StoragePrinter:
    def __init__(self, val):
        self.val = val

    def to_string(self):
        return _safely(
            "Storage",
            lambda: "Storage size=%d device=%s data=%s"
            % (int(self.val["size"]), _device(self.val), self.val["data"]),
        )


class PointerPrinter:
    """A pointer to one of the above (as in shared_ptr's get()): the address, then the object."""

    def __init__(self, val, printer):
        self.val = val
        self.printer = printer

    def to_string(self):
        # The plain name: shared_ptr's get() is typed __shared_ptr<T, _Lock_policy>::element_type*.
        name = str(self.val.type.strip_typedefs().target().strip_typedefs()) + " *"
        if int(self.val) == 0:
            return "(%s) 0x0" % name
        return "(%s) %s -> %s" % (
            name,
            hex(int(self.val)),
            self.printer(self.val.dereference()).to_string(),
        )


class SharedPtrPrinter:
    """std::shared_ptr<TensorImpl | Node> when libstdc++'s own printers are not loaded. (When
    they are, theirs prints the shared_ptr and ours its get(), through PointerPrinter.)"""

    def __init__(self, val, printer):
        self.val = val
        self.printer = printer

    def to_string(self):
        return "shared_ptr " + PointerPrinter(_pointer(self.val), self.printer).to_string()


_PRINTERS = {
    "mg::Tensor": TensorPrinter,
    "mg::TensorImpl": TensorImplPrinter,
    "mg::Node": NodePrinter,
    "mg::Storage": StoragePrinter,
}


class MosgradPrinters(gdb.printing.PrettyPrinter):
    """One entry in `info pretty-printer`; `disable pretty-printer global mosgrad` turns it off."""

    def __init__(self):
        super().__init__("mosgrad", [])

    def __call__(self, val):
        if not self.enabled:
            return None
        t = val.type
        if t.code == gdb.TYPE_CODE_REF or t.code == gdb.TYPE_CODE_RVALUE_REF:
            t = t.target()
        t = t.strip_typedefs()
        if t.code == gdb.TYPE_CODE_PTR:
            target = t.target().unqualified().strip_typedefs()
            printer = _PRINTERS.get(str(target.tag)) if target.tag else None
            return PointerPrinter(val, printer) if printer else None
        tag = t.unqualified().tag
        if tag is None:
            return None
        if tag in _PRINTERS:
            return _PRINTERS[tag](val)
        if tag.startswith("std::shared_ptr<"):
            try:
                inner = _PRINTERS.get(str(t.template_argument(0).strip_typedefs().tag))
            except RuntimeError:  # no template information in the debug info
                return None
            return SharedPtrPrinter(val, inner) if inner else None
        return None


gdb.printing.register_pretty_printer(gdb.current_objfile(), MosgradPrinters(), replace=True)
