"""The task framework: a task as data (``TaskCfg`` of term configs), run by ``ManagerBasedEnv`` and its managers.

It knows no particular term: what it needs of one is a protocol (``managers.protocols``); the terms are in
``gym_graphreset.mdp``, the tasks in ``gym_graphreset.tasks``.
"""
