// Calls every public method of the official client and prints what it returned, as JSON.
// Arguments: project, channel, a build number, and a channel with no builds.

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import io.canvasmc.canvas.ClientV2;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.function.Supplier;

public final class Drive {
    private static JsonObject build(ClientV2.Build b) {
        JsonObject out = new JsonObject();
        out.addProperty("buildNumber", b.buildNumber());
        out.addProperty("url", b.url());
        out.addProperty("downloadUrl", b.downloadUrl());
        out.addProperty("channelVersion", b.channelVersion());
        out.addProperty("timestamp", b.timestamp());
        out.addProperty("buildStatus", b.buildStatus().name());
        out.addProperty("hasChanges", b.hasChanges());
        JsonArray commits = new JsonArray();
        for (ClientV2.Commit c : b.commits()) {
            JsonObject commit = new JsonObject();
            commit.addProperty("message", c.message());
            commit.addProperty("hash", c.hash());
            commit.addProperty("author", c.author());
            commits.add(commit);
        }
        out.add("commits", commits);
        return out;
    }

    private static JsonArray builds(ClientV2.Build[] builds) {
        JsonArray out = new JsonArray();
        for (ClientV2.Build b : builds) out.add(build(b));
        return out;
    }

    // A failed call is recorded with its message and its cause's, as a plugin would log it.
    private static JsonObject failure(Supplier<Object> call) {
        JsonObject out = new JsonObject();
        try {
            out.addProperty("returned", String.valueOf(call.get()));
        } catch (RuntimeException e) {
            out.addProperty("error", e.getMessage());
            out.addProperty("cause", e.getCause() == null ? null : e.getCause().getMessage());
        }
        return out;
    }

    private static JsonObject follow(String url) throws Exception {
        HttpClient http = HttpClient.newBuilder().followRedirects(HttpClient.Redirect.NEVER).build();
        HttpResponse<String> response = http.send(
            HttpRequest.newBuilder(URI.create(url)).header("Accept", "application/json").GET().build(),
            HttpResponse.BodyHandlers.ofString());
        JsonObject out = new JsonObject();
        out.addProperty("url", url);
        out.addProperty("status", response.statusCode());
        out.addProperty("location", response.headers().firstValue("Location").orElse(null));
        return out;
    }

    public static void main(String[] args) throws Exception {
        String project = args[0], channel = args[1], emptyChannel = args[3];
        int number = Integer.parseInt(args[2]);
        JsonObject out = new JsonObject();
        JsonArray projects = new JsonArray();
        for (String slug : ClientV2.getProjects()) projects.add(slug);
        out.add("getProjects()", projects);

        ClientV2 client = ClientV2.getClientFor(project);
        out.addProperty("getProject()", client.getProject());
        out.add("getStableBuilds()", builds(client.getStableBuilds()));
        out.add("getBuilds(true)", builds(client.getBuilds(true)));
        out.add("getBuilds(false)", builds(client.getBuilds(false)));
        out.add("getBuilds(channel, true)", builds(client.getBuilds(channel, true)));
        out.add("getBuilds(channel, false)", builds(client.getBuilds(channel, false)));
        out.add("getBuilds(hasChanges)", builds(client.getBuilds(ClientV2.Build::hasChanges)));
        out.add("getBuild(number)", build(client.getBuild(number)));
        out.add("getStableBuildsNewerThan(number)", builds(client.getStableBuildsNewerThan(number)));
        out.add("getLatestStableBuild()", build(client.getLatestStableBuild()));
        out.add("getLatestBuild(true)", build(client.getLatestBuild(true)));
        out.add("getLatestBuild(false)", build(client.getLatestBuild(false)));
        out.add("getLatestBuild(channel, true)", build(client.getLatestBuild(channel, true)));
        out.add("getLatestBuild(channel, false)", build(client.getLatestBuild(channel, false)));
        out.add("getLatestBuild(emptyChannel, false)",
                failure(() -> client.getLatestBuild(emptyChannel, false)));
        out.add("getJavadocUrl(Build, channel)",
                follow(client.getJavadocUrl(ClientV2.Build.class, channel)));
        out.add("getJavadocUrl(ClientV2, \"\")", follow(client.getJavadocUrl(ClientV2.class, "")));
        client.switchProject("NOPE");
        out.add("switchProject(NOPE).getBuilds(true)", failure(() -> client.getBuilds(true)));
        System.out.println(out);
    }
}
