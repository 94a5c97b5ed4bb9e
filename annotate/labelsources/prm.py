"""A registered PRM's step scores, centred on its calibrated first-error threshold (the threshold reads as 0.5)."""
from . import LabelSource, register

PRM = register(LabelSource(name="prm", label="A registered PRM's step score"))
