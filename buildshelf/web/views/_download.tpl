<a class="download" href="{{b.button_url}}">
  <span class="download-label">Download <span class="file">{{b.file}}</span></span>
  <span class="download-detail">build #{{b.number}}, channel {{b.channel}}{{", experimental" if b.experimental else ""}}</span>
</a>
