"""Labels imported from a file (soft labels, a first-error index or PRM800K rows), under a name the importer gives."""
from . import LabelSource, register

IMPORT = register(LabelSource(name="import", label="Imported from a file (external, named)"))
