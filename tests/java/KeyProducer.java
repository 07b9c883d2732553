import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.DoubleSerializer;
import org.apache.kafka.common.serialization.IntegerSerializer;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Produces records keyed by one key type's Java serializer, with Kafka's default partitioner,
 * so a test can check that schema/keytypes.py places every key where this producer does.
 *
 * <p>Usage: {@code KeyProducer <bootstrap servers> <topic> <string|int|long|double|record>
 * <count>}. A record key is a JSON object {@code {"shop": string, "seq": long, "lane": int}}
 * written by Jackson's {@code ObjectMapper}, as Spring Kafka's {@code JsonSerializer} does.
 * The keys are the edge cases of the type first, then pseudo-random ones from a fixed seed (the
 * same keys on every run); each record's value is the key's Java text ({@code String.valueOf}).
 * Exits 0 once every record is acknowledged by all in-sync replicas, 1 when producing failed
 * and 2 on bad arguments, with the cause on stderr.
 */
public final class KeyProducer {
    private static final long SEED = 0x5EEDL;
    private static final int MAX_STRING_LENGTH = 40;
    // code point ranges random string keys are drawn from: ASCII, Latin-1, CJK, emoji
    private static final int[][] CODE_POINTS = {
        {0x20, 0x7E}, {0xA0, 0xFF}, {0x4E00, 0x9FFF}, {0x1F300, 0x1FAFF},
    };

    private KeyProducer() {}

    public static void main(String[] args) {
        if (args.length != 4) {
            exit(2, "usage: KeyProducer <bootstrap servers> <topic> "
                + "<string|int|long|double|record> <count>");
        }
        String bootstrap = args[0];
        String topic = args[1];
        String type = args[2];
        int count = parseCount(args[3]);
        Random random = new Random(SEED);
        try {
            int produced = switch (type) {
                case "string" -> produce(bootstrap, topic, new StringSerializer(),
                    stringKeys(count, random));
                case "int" -> produce(bootstrap, topic, new IntegerSerializer(),
                    intKeys(count, random));
                case "long" -> produce(bootstrap, topic, new LongSerializer(),
                    longKeys(count, random));
                case "double" -> produce(bootstrap, topic, new DoubleSerializer(),
                    doubleKeys(count, random));
                case "record" -> produce(bootstrap, topic, jsonSerializer(),
                    recordKeys(count, random));
                default -> exit(2, "unknown key type " + type
                    + ": expected string, int, long, double or record");
            };
            System.out.println("produced " + produced + " " + type + " keys to " + topic);
        } catch (Exception e) {
            exit(1, "producing " + type + " keys to " + topic + " on " + bootstrap + " failed: "
                + e);
        }
    }

    /** Sends one record per key and waits for all; throws the first failed send's error,
     * stopping at it. */
    private static <K> int produce(
            String bootstrap, String topic, Serializer<K> serializer, List<K> keys)
            throws Exception {
        AtomicReference<Exception> failure = new AtomicReference<>();
        try (Producer<K, String> producer =
                new KafkaProducer<>(settings(bootstrap), serializer, new StringSerializer())) {
            for (K key : keys) {
                if (failure.get() != null) {
                    break; // e.g. no metadata: each further send would block max.block.ms too
                }
                ProducerRecord<K, String> record =
                    new ProducerRecord<>(topic, key, String.valueOf(key));
                producer.send(record, (metadata, error) -> {
                    if (error != null) {
                        failure.compareAndSet(null, error);
                    }
                });
            }
            producer.flush();
        }
        if (failure.get() != null) {
            throw failure.get();
        }
        return keys.size();
    }

    /** acks=all and no partitioner.class: the default partitioner is what the test checks. */
    private static Properties settings(String bootstrap) {
        Properties settings = new Properties();
        settings.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        settings.put(ProducerConfig.ACKS_CONFIG, "all");
        settings.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        settings.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000"); // no metadata: fail, not hang
        settings.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        return settings;
    }

    private static List<String> stringKeys(int count, Random random) {
        List<String> edges = List.of(
            "a", "0", "-1", "é", "日本", "😀", "a\u0000b", "Ünïcödé 🦆 ключ",
            "x".repeat(1000), "日本語のキー😀".repeat(50));
        return keys(edges, count, () -> randomString(random));
    }

    private static List<Integer> intKeys(int count, Random random) {
        List<Integer> edges = List.of(Integer.MIN_VALUE, Integer.MAX_VALUE, 0, -1, 1);
        return keys(edges, count, random::nextInt);
    }

    private static List<Long> longKeys(int count, Random random) {
        List<Long> edges = List.of(
            Long.MIN_VALUE, Long.MAX_VALUE, 0L, -1L, 1L,
            (long) Integer.MIN_VALUE - 1, (long) Integer.MAX_VALUE + 1);
        return keys(edges, count, random::nextLong);
    }

    private static List<Double> doubleKeys(int count, Random random) {
        List<Double> edges = List.of(
            Double.NEGATIVE_INFINITY, -Double.MAX_VALUE, -1.0, -Double.MIN_VALUE, -0.0, 0.0,
            Double.MIN_VALUE, Double.MIN_NORMAL, 1.0, Double.MAX_VALUE, Double.POSITIVE_INFINITY,
            Double.NaN,
            Double.longBitsToDouble(0xFFF0000000000001L)); // a NaN DoubleSerializer writes as NaN
        return keys(edges, count, () -> randomDouble(random));
    }

    /** Jackson's ObjectMapper as a Kafka serializer, as Spring Kafka's JsonSerializer is. */
    private static Serializer<ObjectNode> jsonSerializer() {
        ObjectMapper mapper = new ObjectMapper();
        return (topic, node) -> {
            try {
                return mapper.writeValueAsBytes(node);
            } catch (Exception e) {
                throw new IllegalStateException("Jackson could not write " + node, e);
            }
        };
    }

    private static List<ObjectNode> recordKeys(int count, Random random) {
        ObjectMapper mapper = new ObjectMapper();
        List<ObjectNode> edges = new ArrayList<>();
        String[] shops = {
            "", "a", "quote \" and \\ and /", "tab\tnew line\ncontrol \u0001\u001f",
            "a\u0000b", "\u2028 é 日本 😀"};
        long[] seqs = {Long.MIN_VALUE, Long.MAX_VALUE, 0L, -1L};
        int[] lanes = {Integer.MIN_VALUE, Integer.MAX_VALUE, 0};
        for (String shop : shops) {
            for (long seq : seqs) {
                for (int lane : lanes) {
                    edges.add(recordKey(mapper, shop, seq, lane));
                }
            }
        }
        // few shops and lanes, so many keys share their first fields and differ in the next
        Supplier<String> shop = () -> random.nextBoolean()
            ? "shop-" + random.nextInt(50) : randomString(random);
        return keys(edges, count, () -> recordKey(
            mapper, shop.get(), random.nextLong(), random.nextInt(7) - 3));
    }

    private static ObjectNode recordKey(ObjectMapper mapper, String shop, long seq, int lane) {
        return mapper.createObjectNode().put("shop", shop).put("seq", seq).put("lane", lane);
    }

    /** The first `count` of the edge cases, then random keys up to `count`. */
    private static <K> List<K> keys(List<K> edges, int count, Supplier<K> next) {
        List<K> keys = new ArrayList<>(edges.subList(0, Math.min(count, edges.size())));
        while (keys.size() < count) {
            keys.add(next.get());
        }
        return keys;
    }

    /** Any bit pattern (subnormals, NaNs, huge exponents) or an everyday decimal, by turns. */
    private static double randomDouble(Random random) {
        if (random.nextBoolean()) {
            return Double.longBitsToDouble(random.nextLong());
        }
        return (random.nextInt(2_000_001) - 1_000_000) / 100.0;
    }

    /** A non-empty string of whole code points (no lone surrogates) of 1 to 4 UTF-8 bytes. */
    private static String randomString(Random random) {
        StringBuilder text = new StringBuilder();
        int length = 1 + random.nextInt(MAX_STRING_LENGTH);
        for (int i = 0; i < length; i++) {
            int[] range = CODE_POINTS[random.nextInt(CODE_POINTS.length)];
            text.appendCodePoint(range[0] + random.nextInt(range[1] - range[0] + 1));
        }
        return text.toString();
    }

    private static int parseCount(String text) {
        try {
            int count = Integer.parseInt(text);
            if (count >= 0) {
                return count;
            }
        } catch (NumberFormatException e) {
            // falls through to the message below
        }
        return exit(2, "count must be a whole number >= 0, got " + text);
    }

    private static int exit(int status, String message) {
        System.err.println("KeyProducer: " + message);
        System.exit(status);
        return status; // not reached: lets a switch arm or a return end here
    }
}
