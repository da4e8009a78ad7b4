raise RuntimeError("a .disabled pack must never be imported")
