"""The capacity calculator, in layers, one folder each, lowest first: ``base/``, ``model/``, ``readers/``,
``hardware/``, ``sizing/``, ``engines/``, ``plan/``, ``uses/`` (``data/`` holds the bundled JSON). A module imports
only its own folder or a lower one (``tests/house/test_house.py`` holds the order and checks every import)."""
