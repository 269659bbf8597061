</main>
<footer class="site">
  <div class="wrap">
    <p>Dates and times are UTC. The same data is served as JSON by the
    <a href="/api-document">Buildshelf API</a>.</p>
  </div>
</footer>
</body>
</html>
