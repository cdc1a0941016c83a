"""Plain-English text rules shared by the layers: words and stems (``words``), units (``units``)."""
