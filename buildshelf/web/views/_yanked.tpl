<div class="build-head">
  <h3 id="{{y.anchor}}-title">Build #{{y.number}}</h3>
  <span class="channel">{{y.channel}}</span>
  <span class="badge yanked">Yanked</span>
  % if y.experimental:
  <span class="badge">Experimental</span>
  % end
  <span class="date">built <time datetime="{{y.iso}}">{{y.date}}</time>, yanked <time datetime="{{y.yanked_iso}}">{{y.yanked_date}}</time></span>
</div>
% if y.reason:
<p class="reason">Why: {{y.reason}}</p>
% else:
<p class="reason empty">No reason was given.</p>
% end
% if y.sha256:
<p class="integrity"><span class="file">{{y.file}}</span>, {{y.size_text}}, SHA-256 <code class="sha256">{{y.sha256}}</code></p>
% else:
<p class="integrity"><span class="file">{{y.file}}</span></p>
% end
