"""The store's PostgreSQL driver, psycopg 3 straight:

    statements.py  the store's statements for PostgreSQL, derived from `statements`
    wire.py        jobs, sent in one pipeline or, alone, as prepared statements
    pools.py       the connections (each thread's, the shared read ones), ANALYZE
    loop.py        `PgLoopWriter`: group commit and reads on an event loop
    copying.py     a crowd's rows by COPY
    reads.py       the reads' PostgreSQL form (`reads.Straight.pg`)
    driver.py      `PgDriver`, the driver the store uses
"""
