"""The ``head`` method: a small classifier trained on every label, over a step's own columns or cached vectors.

Full fine-tuning reads every token of every labeled path once per epoch through the whole encoder: on two CPU
cores a budget of minutes reaches a few hundred of a dataset version's tens of thousands of paths. Here a
logistic regression learns from all the labels in seconds, over columns built from the texts themselves or (the
vector recipes) from a frozen backbone's vectors, each distinct text encoded once (``features.FeatureCache``).
The default recipe (``lexical``) reads a step's words and the dense columns of it and of the step before it
(position, arithmetic and number checks); the ORM reads the same evidence for a whole solution. The recipes that
read vectors share one cache between PRM and ORM, so both see the same backbone. Where examples share their
context (rated alternatives after one prefix; solutions to one problem), the fit also learns from their
contrast: which of two siblings the labelers rated better.

Modules: ``spec`` (what a head reads and is), ``features`` (its columns and examples), ``models`` and
``lexical`` (the classifiers), ``persistence`` (on disk, versioned), ``fit``, ``calibrate`` (the first-error
threshold, cross-fitted on training problems), ``validate``, ``run`` (the method's run) and ``scorer``.
"""
