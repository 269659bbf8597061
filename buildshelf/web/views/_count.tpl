% if b.downloads:
<span class="count">{{b.downloads}}</span>
% end
