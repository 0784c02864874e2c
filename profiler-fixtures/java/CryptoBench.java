// The seed's CryptoBench (sampling-bias-java-profilers.md): MD5 of random
// strings, with its own differential timing (-DtrackTime=true) of string
// generation against hashing, the truth a profiler's split is held to.
// Only the loop's bounds are the fixture protocol's: a ready line, "go"
// on stdin, SECONDS of execute() calls, a result line (the seed's two
// timers, nanoseconds), then it lingers until stdin closes.
//
// Usage: java -DtrackTime=true CryptoBench SECONDS
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Random;

public class CryptoBench {

    private static final boolean trackTime = Boolean.getBoolean("trackTime");

    long timer1 = 0;
    long timer2 = 0;

    public static void main(String[] args) throws Exception {
        long nanos = (long) (Double.parseDouble(args[0]) * 1e9);
        System.out.println("ready pid=" + ProcessHandle.current().pid());
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in));
        stdin.readLine();
        CryptoBench test = new CryptoBench();
        long deadline = System.nanoTime() + nanos;
        while (System.nanoTime() < deadline) {
            test.execute();
        }
        System.out.println("generation_ns=" + test.timer1 + " hashing_ns=" + test.timer2);
        while (stdin.read() >= 0) {
        }
    }

    public void execute() {
        long N = 100 * 1000;
        RandomStringUtils randomStringUtils = new RandomStringUtils();
        long ts = 0, tf = 0;
        for (long i = 0; i < N; i++) {
            ts = trackTime ? System.nanoTime() : 0;
            String text = randomStringUtils.generate();
            tf = trackTime ? System.nanoTime() : 0;
            timer1 += tf - ts;
            ts = tf;
            crypt(text);
            tf = trackTime ? System.nanoTime() : 0;
            timer2 += tf - ts;
            ts = tf;
        }
    }

    public String crypt(String str) {
        if (str == null || str.length() == 0) {
            throw new IllegalArgumentException("String to encrypt cannot be null or zero length");
        }
        StringBuilder hexString = new StringBuilder();
        try {
            MessageDigest md = MessageDigest.getInstance("MD5");
            md.update(str.getBytes());
            byte[] hash = md.digest();
            for (byte aHash : hash) {
                if ((0xff & aHash) < 0x10) {
                    hexString.append("0" + Integer.toHexString((0xFF & aHash)));
                } else {
                    hexString.append(Integer.toHexString(0xFF & aHash));
                }
            }
        } catch (NoSuchAlgorithmException e) {
            e.printStackTrace();
        }
        return hexString.toString();
    }

    /// The seed's random strings (its repository's helper): 32 letters and
    /// digits.
    static class RandomStringUtils {
        private static final String ALPHABET =
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        private final Random random = new Random();

        public String generate() {
            StringBuilder text = new StringBuilder(32);
            for (int i = 0; i < 32; i++) {
                text.append(ALPHABET.charAt(random.nextInt(ALPHABET.length())));
            }
            return text.toString();
        }
    }
}
