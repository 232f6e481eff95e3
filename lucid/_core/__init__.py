"""lucid's compiled core (the ``_C`` extension) and the op table it is built from."""
