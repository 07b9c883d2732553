"""The catalogue the differential cluster runs: the built-in one plus views added by a
single entry each, to show that a view of an existing kind needs no code: `word_tally`
(string keys), `host_access_hopping` and `host_sessions` (hopping and session windows,
test_differential.py) and four count views whose record keys are written by Kafka's Java
Integer, Long and Double serializers and by Jackson, a record of three fields
(test_typed_keys.py); and four aggregate views of an orders topic, one re-keyed by a
value field, one in hopping windows (tests/orders.py, test_aggregates.py)."""

from __future__ import annotations

from schema import CATALOGUE as BUILT_IN
from schema import KeyField, KeyType, RecordKey, View, ViewKind, WindowSpec
from tests.orders import CUSTOMER_ORDERS, HOURLY_BASKETS, PAID_ORDERS, PRODUCT_SALES

WORD_TALLY = View(
    name="word_tally",
    topic="words",
    kind=ViewKind.COUNT,
    key_field="term",
    type_name="WordTally",
    point_field="wordTally",
    many_field="wordTallies",
    top_field="topTallies",
)

# page views per host in windows of a minute, a new one every 30 s: an event counts twice
HOPS = WindowSpec(size_ms=60_000, grace_ms=30_000, retention_ms=24 * 3_600_000, slide_ms=30_000)
HOST_HOPPING = View(
    name="host_access_hopping",
    topic="pageviews",
    kind=ViewKind.WINDOWED_COUNT,
    key_field="host",
    type_name="HostAccessHop",
    point_field="hostAccessHops",
    top_field="topHostsPerHop",
    event_time_field="timestamp",
    window=HOPS,
)

# page views per host in sessions: events at most 30 s apart
SESSIONS = WindowSpec(gap_ms=30_000, grace_ms=30_000, retention_ms=24 * 3_600_000)
HOST_SESSIONS = View(
    name="host_sessions",
    topic="pageviews",
    kind=ViewKind.WINDOWED_COUNT,
    key_field="host",
    type_name="HostSession",
    point_field="hostSessions",
    top_field="topHostsPerSession",
    event_time_field="timestamp",
    window=SESSIONS,
)

SEAT_COUNTS = View(
    name="seat_counts",
    topic="seats",
    kind=ViewKind.COUNT,
    key_field="seat",
    type_name="SeatCount",
    point_field="seatCount",
    many_field="seatCounts",
    top_field="topSeats",
    key_type=KeyType.INT,
)

ACCOUNT_COUNTS = View(
    name="account_counts",
    topic="accounts",
    kind=ViewKind.COUNT,
    key_field="account",
    type_name="AccountCount",
    point_field="accountCount",
    many_field="accountCounts",
    top_field="topAccounts",
    key_type=KeyType.LONG,
)

PRICE_COUNTS = View(
    name="price_counts",
    topic="prices",
    kind=ViewKind.COUNT,
    key_field="price",
    type_name="PriceCount",
    point_field="priceCount",
    many_field="priceCounts",
    top_field="topPrices",
    key_type=KeyType.DOUBLE,
)

# keys as tests/java/KeyProducer.java writes its records: {"shop": .., "seq": .., "lane": ..}
SHOP_COUNTS = View(
    name="shop_counts",
    topic="shop_orders",
    kind=ViewKind.COUNT,
    key_field="order",
    type_name="ShopCount",
    point_field="shopCount",
    many_field="shopCounts",
    top_field="topShops",
    key_type=RecordKey(
        (KeyField("shop"), KeyField("seq", KeyType.LONG), KeyField("lane", KeyType.INT))
    ),
)

TYPED_KEY_VIEWS = (SEAT_COUNTS, ACCOUNT_COUNTS, PRICE_COUNTS, SHOP_COUNTS)

ORDER_VIEWS = (CUSTOMER_ORDERS, PAID_ORDERS, PRODUCT_SALES, HOURLY_BASKETS)
CATALOGUE = (
    *BUILT_IN,
    WORD_TALLY,
    HOST_HOPPING,
    HOST_SESSIONS,
    *TYPED_KEY_VIEWS,
    *ORDER_VIEWS,
)
