"""The store's SQLite driver (an SQLite file), sqlite3 straight:

    forms.py   the statements and reads as sqlite3 runs them (compiled once)
    driver.py  `SqliteDriver`: writes on each thread's connection, reads, crowds
    loop.py    `LoopWriter`: group commit from an event loop
"""
