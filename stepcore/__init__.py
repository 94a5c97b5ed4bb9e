"""Step splitting and answer grading, shared by the labeling app and the Django-free node.

The importers, the workspace and the exports (``annotate``) and the sampler and rollouts (``rewards.sampling``) cut
responses into steps (``stepcore.steps`` over the ``stepcore.steprules`` registry) and grade final answers
(``stepcore.grading``, the ``stepcore.graders`` registry) with the same code, so both agree on every step boundary
and every verdict. Plain Python: nothing here imports Django or any app.
"""
