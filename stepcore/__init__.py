"""Step splitting, answer grading and outbound requests, shared by the web apps and the Django-free node.

The importers, the workspace and the exports (``annotate``) and the sampler and rollouts (``rewards.sampling``) cut
responses into steps (``stepcore.steps`` over the ``stepcore.steprules`` registry) and grade final answers
(``stepcore.grading``, the ``stepcore.graders`` registry) with the same code, so both agree on every step boundary
and every verdict. Requests to addresses people give (webhooks, served-model endpoints) go through
``stepcore.outbound``, whose address policy the web side and a node's served sampler both enforce.
Plain Python: nothing here imports Django or any app.
"""
