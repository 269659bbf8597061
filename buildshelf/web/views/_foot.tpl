</main>
<footer class="site">
  <div class="wrap">
    <p>Dates and times are UTC. The same data is served as JSON by the
    <a href="/api/v2/openapi.json">Buildshelf API</a>.</p>
  </div>
</footer>
</body>
</html>
