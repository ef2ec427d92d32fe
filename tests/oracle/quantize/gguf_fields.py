"""A GGUF metadata value as Python data, read through gguf-py's GGUFReader (shared by the quantize oracles)."""
from gguf import GGUFValueType


def field(reader, key):
    """The value of `key`: a str, a number, or a list of them; None when the file has no such key."""
    f = reader.fields.get(key)
    if f is None:
        return None
    if f.types[0] == GGUFValueType.ARRAY:
        if f.types[1] == GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode() for i in f.data]
        return [f.parts[i].tolist()[0] for i in f.data]
    if f.types[0] == GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode()
    return f.parts[f.data[0]].tolist()[0]
